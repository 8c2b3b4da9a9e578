"""tfplace: a TensorFlow-native device-placement optimizer."""

import setuptools

# Pins resolve together on a fresh Python 3.11 machine (see WORKSPACE_NOTES.md):
# tf-agents 0.19 needs numpy < 2 and the Keras 2 API (tf-keras); TF 2.21 no
# longer pulls tensorboard, which tf-agents' train() needs.
INSTALL_REQUIRES = [
    "tensorflow==2.21.0",
    "tf-keras==2.21.0",
    "tensorflow-probability==0.23.0",
    "tf-agents==0.19.0",
    "tensorboard==2.21.0",
    "numpy==1.26.4",
    "absl-py==2.5.1",
    "scipy==1.17.1",
    "numba==0.68.1",
    "pymetis==2025.2.2",
    "pyscotch==7.0.5",
    "ortools==9.10.4067",
    "tqdm==4.70.1",
]

setuptools.setup(
    name="tfplace",
    version="0.1.0",
    description="Device placement optimization for TensorFlow training graphs",
    packages=setuptools.find_packages(include=["tfplace", "tfplace.*"]),
    python_requires=">=3.10,<3.13",
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "viz": ["matplotlib==3.11.2"],
        "test": ["pytest==9.2.0", "pytest-xdist==3.8.0", "matplotlib==3.11.2"],
    },
    entry_points={"console_scripts": ["tfplace=tfplace.cli.main:run_main"]},
)

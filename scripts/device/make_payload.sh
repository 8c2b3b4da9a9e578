#!/bin/bash
# Builds what a lent GPU machine (tool `device`) needs to run tfplace with
# TensorFlow, which its image lacks: TF 2.21 and tfplace's pinned
# dependencies as cp312 wheels installed into one folder, xz-compressed and
# split into .gpu/p00..p07 (a call carries at most 64 MiB, so one part per
# call). NumPy, numba, SciPy and typing_extensions are the image's (TF's
# cp312 build needs NumPy 2). CUDA: cudart and CUPTI 12 are carried; TF's
# other CUDA 12 libraries resolve to the image's CUDA 13 ones (setup.sh).
# Takes ~8 minutes here (the compression); ~460 MB in all.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${TMPDIR:-/tmp}/tfplace_payload
rm -rf "$work" && mkdir -p "$work/wheels" .gpu
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux_2_24_x86_64 --platform manylinux_2_31_x86_64
  --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64
  --platform any"
pins=$(python3 - <<'PY'
import re
text = open("setup.py").read()
skip = {"numpy", "numba", "scipy", "matplotlib", "pytest", "pytest-xdist"}
print(" ".join(p for p in re.findall(r'"([A-Za-z0-9_.-]+==[^"]+)"', text)
               if p.split("==")[0].lower() not in skip))
PY
)
# TF's and tf-agents' own dependencies (pinned as in the tested venv).
extra="astunparse==1.6.3 flatbuffers==25.12.19 gast==0.7.0 google-pasta==0.2.0
  grpcio==1.74.0 h5py==3.14.0 keras==3.15.1 ml_dtypes==0.5.4 namex==0.1.0
  opt_einsum==3.4.0 optree==0.15.0 protobuf==7.36.2 six==1.17.0
  termcolor==3.3.0 wrapt==2.5.2 tensorboard-data-server==0.7.2
  cloudpickle==3.1.3 decorator==5.3.1 dm-tree==0.1.10 gin-config==0.5.0
  gym-notices==0.1.0 immutabledict==4.3.1 attrs==26.1.0 rich==15.0.0
  markdown-it-py==4.3.0 mdurl==0.1.2 Pygments==2.21.0 Markdown==3.11.3
  Werkzeug==3.1.9 MarkupSafe==3.0.4 packaging==26.4
  nvidia-cuda-runtime-cu12==12.9.79 nvidia-cuda-cupti-cu12==12.8.90"
for p in $pins $extra; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp $plat -d "$work/wheels" "$p"
done
python3 -m pip wheel -q --no-deps -w "$work/wheels" gym==0.23.0  # sdist only
python3 -m pip install -q --no-deps --no-compile --target "$work/site" \
  --python-version 3.12 --implementation cp --only-binary=:all: $plat \
  "$work"/wheels/*.whl
rm -rf "$work"/site/tensorflow/include "$work"/site/nvidia/*/include "$work/site/bin"
rm -rf "$work"/site/typing_extensions*
tar cf - -C "$work/site" . | xz -T0 -6 > "$work/site.tar.xz"
rm -f .gpu/p0?
split -n 8 -d "$work/site.tar.xz" .gpu/p
cp scripts/device/setup.sh .gpu/setup.sh
ls -la .gpu

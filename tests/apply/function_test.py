"""tfplace.apply on a custom tf.function train step (two logical CPUs), and
the bad inputs that need two devices."""

import pytest

from children import check_training, run_child

CPUS = ["/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1"]


def test_custom_step_on_two_cpus_matches_unplaced_step_and_the_placement():
  result = run_child("two_cpu_function")
  check_training(result, CPUS)
  assert result["named_ops"] == result["trace_ops"]
  assert result["unnamed_ops"] == [] and result["missing_ops"] == []
  variables = result["variables"]
  for t in range(2):  # Adam's slots of a0/b0/a1/b1 sit with their variable.
    for v in (f"a{t}", f"b{t}"):
      assert variables[f"Adam/m/{v}:0"] == variables[f"{v}:0"]


@pytest.fixture(scope="module")
def errors():
  return run_child("two_cpu_errors")


def test_bad_inputs_are_one_clear_error_each(errors):
  assert errors["existing_variables"].startswith("PlacementError: variable ")
  assert "lives on /job:localhost/replica:0/task:0/device:CPU:0 but the " \
         "placement puts it on /job:localhost/replica:0/task:0/device:CPU:1" \
         in errors["existing_variables"]
  assert "factory=True" in errors["existing_variables"]
  assert errors["split"].startswith("PlacementError: the placement splits "
                                    "variable ")
  assert "Adam/AssignSubVariableOp" in errors["split"]
  for key in ("other_model", "other_model_keras"):
    assert errors[key].startswith("PlacementError: the placement names 0 of "
                                  "the "), errors[key]
    assert "made for another step or model" in errors[key]
  assert errors["missing_device"].startswith("PlacementError: the placement "
                                             "puts ")
  assert "device:CPU:2, which this TensorFlow runtime does not have" in \
      errors["missing_device"]

"""list cluster presets, or show one as JSON.

usage: tfplace clusters [--show NAME_OR_JSON] [--json]

Without --show, lists the presets: name, device count and device types.
With --show, prints that cluster (a preset or a cluster JSON file) as JSON;
`local:N` is the preset `local` with its CPU as N logical CPUs (as
`measure` and `place --target local` run them in this process).
"""

import json
import sys
from typing import List

from absl import flags

from tfplace.errors import TfplaceError

_SHOW = flags.DEFINE_string("show", None, "a preset name or cluster JSON file "
                            "to print as JSON")
_JSON = flags.DEFINE_bool("json", False, "print the list as one JSON object")


def main(argv: List[str]) -> None:
  """Runs `tfplace clusters`; see the module docstring."""
  from tfplace.cli.cluster_arg import load_cluster_arg
  from tfplace.cost import presets
  if len(argv) != 1:
    raise TfplaceError(f"unexpected arguments {argv[1:]}; usage: tfplace "
                       "clusters [--show NAME] [--json]")
  if _SHOW.value:
    sys.stdout.write(load_cluster_arg(_SHOW.value).to_json() + "\n")
    return
  rows = []
  for name in presets.list_presets():
    cluster = presets.preset(name)
    types = {}
    for d in cluster.devices:
      types[d.type] = types.get(d.type, 0) + 1
    rows.append({"name": name, "num_devices": cluster.num_devices,
                 "device_types": types})
  if _JSON.value:
    sys.stdout.write(json.dumps({"presets": rows}) + "\n")
    return
  for row in rows:
    kinds = ", ".join(f"{n} {t}" for t, n in row["device_types"].items())
    noun = "device" if row["num_devices"] == 1 else "devices"
    sys.stdout.write(f"{row['name']:<16} {row['num_devices']:>3} {noun:<7} "
                     f"({kinds})\n")

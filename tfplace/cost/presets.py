"""Cluster presets with datasheet figures, and `load_cluster`.

Figures (peak float32 FLOP/s without tensor cores, memory bandwidth, memory,
link bandwidth per direction) come from vendor datasheets; see
WORKSPACE_NOTES.md for the sources. Link bandwidths are effective figures a
little under the theoretical peak (PCIe 3.0 x16: 15.75 GB/s raw, ~12 GB/s
achieved; PCIe 5.0 x16: 63 GB/s raw, ~50 GB/s).
"""

import functools
import os
from typing import Callable, Dict, List, Optional, Tuple

from tfplace.cost.cluster import Cluster, Device, Link, LinkSpec, make_cluster
from tfplace.errors import ClusterError

GB = 1e9
GIB = 2**30

# Per device: (peak fp32 FLOP/s, memory bandwidth B/s, memory bytes) and,
# for GPUs with tensor cores, the dense float16 / bfloat16 tensor-core peak
# (`Device.half_flops`; the datasheets' figures "with sparsity" are twice it).
K80_GPU = (4.37e12, 240 * GB, 12 * GB)        # one GK210 of a K80 board, boost
V100_SXM2 = (15.7e12, 900 * GB, 16 * GB, 125e12)   # Tesla V100 SXM2 16 GB
H100_SXM5 = (67e12, 3.35e12, 80 * GB, 989e12)      # H100 SXM5 80 GB
H200_SXM = (67e12, 4.8e12, 141 * GB, 989e12)       # H200 SXM 141 GB
# Haswell E5-2699 v3: 18 cores x 2.3 GHz x 32 fp32 FLOP/cycle (2 AVX2 FMA),
# 4 x DDR4-2133 = 68 GB/s.
HASWELL_18C = (1.32e12, 68 * GB, 128 * GB)
# DGX-1: 2 x E5-2698 v4, 40 cores x 2.2 GHz x 32; 8 x DDR4-2400 = 154 GB/s.
BROADWELL_2X20C = (2.8e12, 154 * GB, 512 * GB)
# DGX H100: 2 x Xeon 8480C, 112 cores x 2.0 GHz x 64 (AVX-512, 2 FMA);
# 16 x DDR5-4800 = 614 GB/s.
SAPPHIRE_2X56C = (14.3e12, 614 * GB, 2048 * GB)

PCIE3 = LinkSpec(latency_s=1e-5, bandwidth=12 * GB, kind="pcie")
PCIE5 = LinkSpec(latency_s=1e-5, bandwidth=50 * GB, kind="pcie")
NVLINK2_X2 = LinkSpec(latency_s=5e-6, bandwidth=50 * GB, kind="nvlink")
NVLINK4_SWITCH = LinkSpec(latency_s=5e-6, bandwidth=450 * GB, kind="nvlink")
ETHERNET_25G = LinkSpec(latency_s=5e-5, bandwidth=25e9 / 8, kind="network")


def _device(name: str, figures, launch_overhead_s: float,
            slots: int = 1) -> Device:
  flops, bandwidth, memory, *half = figures
  kind = "CPU" if "CPU" in name.upper() else "GPU"
  return Device(name=name, type=kind, peak_flops=flops,
                memory_bandwidth=bandwidth, memory_bytes=memory,
                launch_overhead_s=launch_overhead_s, slots=slots,
                half_flops=half[0] if half else 0.0)


def _host(task: str, cpu, gpu, num_gpus: int, cpu_slots: int):
  """Devices of one host: its CPU then its GPUs."""
  devices = [_device(f"{task}/device:CPU:0", cpu, 1e-5, cpu_slots)]
  devices += [_device(f"{task}/device:GPU:{i}", gpu, 5e-6)
              for i in range(num_gpus)]
  return devices


def _pairs(devices, spec: LinkSpec, gpus_only: bool) -> List[Link]:
  """Links between every pair (one entry serves both directions)."""
  names = [d.name for d in devices if not gpus_only or d.type == "GPU"]
  return [Link(a, b, spec.latency_s, spec.bandwidth, spec.kind)
          for i, a in enumerate(names) for b in names[i + 1:]]


def _single_host(name: str, cpu, gpu, num_gpus: int, cpu_slots: int,
                 gpu_link: Optional[LinkSpec], host_link: LinkSpec) -> Cluster:
  devices = _host("/job:localhost/replica:0/task:0", cpu, gpu, num_gpus,
                  cpu_slots)
  links = _pairs(devices, gpu_link, True) if gpu_link else []
  return make_cluster(name, devices, links, default_link=host_link)


def k80x2() -> Cluster:
  """ColocRL's machine: an 18-core Haswell CPU (4 inter-op slots) + 2 K80
  GPUs (GK210 dies) over PCIe 3.0."""
  return _single_host("k80x2", HASWELL_18C, K80_GPU, 2, 4, None, PCIE3)


def k80x4() -> Cluster:
  """As `k80x2` with 4 K80 GPUs."""
  return _single_host("k80x4", HASWELL_18C, K80_GPU, 4, 4, None, PCIE3)


def v100x4_nvlink() -> Cluster:
  """Half a DGX-1: 4 V100 SXM2 (2 NVLink 2.0 links per pair) + host CPU."""
  return _single_host("v100x4_nvlink", BROADWELL_2X20C, V100_SXM2, 4, 8,
                      NVLINK2_X2, PCIE3)


def h100x8_nvlink() -> Cluster:
  """A DGX H100: 8 H100 SXM5 on NVSwitch (450 GB/s per direction) + CPU."""
  return _single_host("h100x8_nvlink", SAPPHIRE_2X56C, H100_SXM5, 8, 8,
                      NVLINK4_SWITCH, PCIE5)


def two_hosts_4gpu() -> Cluster:
  """Two hosts (/job:worker/task:0 and task:1), each a CPU + 4 V100 SXM2 on
  NVLink, joined by 25 Gb/s Ethernet (the default link)."""
  devices, links = [], []
  for task in range(2):
    host = _host(f"/job:worker/replica:0/task:{task}", BROADWELL_2X20C,
                 V100_SXM2, 4, 8)
    devices += host
    links += _pairs(host, NVLINK2_X2, True)
    links += [Link(host[0].name, g.name, PCIE3.latency_s, PCIE3.bandwidth,
                   PCIE3.kind) for g in host[1:]]
  return make_cluster("2hosts_4gpu", devices, links, default_link=ETHERNET_25G)


def cpu_cluster(num_devices: int, peak_flops: float = 1e11,
                memory_bandwidth: float = 2e10, memory_bytes: float = 8 * GB,
                latency_s: float = 1e-5, bandwidth: float = 1e10,
                slots: int = 1, launch_overhead_s: float = 5e-6,
                name: Optional[str] = None) -> Cluster:
  """`num_devices` identical CPU devices /device:CPU:0.. (for tests)."""
  if num_devices < 1:
    raise ClusterError("cpu_cluster needs at least one device")
  devices = [Device(f"/job:localhost/replica:0/task:0/device:CPU:{i}", "CPU",
                    peak_flops, memory_bandwidth, memory_bytes,
                    launch_overhead_s, slots) for i in range(num_devices)]
  return make_cluster(name or f"cpu{num_devices}", devices,
                      default_link=LinkSpec(latency_s, bandwidth, "host"))


def local(num_cpus: Optional[int] = None) -> Cluster:
  """The devices TensorFlow sees here, with rough figures.

  CPU: one device per configured logical CPU (1 if none configured), or
  `num_cpus` of them (the preset `local:N`: a session of tfplace's own,
  as `measure` and `--target local` open, makes that many); peak FLOP/s =
  cores x 2.5 GHz x 16 (one AVX2 FMA unit), memory from /proc/meminfo,
  20 GB/s memory bandwidth; all shared among the logical CPUs.
  GPUs: figures from a small table by name, else V100-like.
  """
  import tensorflow as tf
  n_cpu = num_cpus
  if n_cpu is None:
    cpus = tf.config.list_physical_devices("CPU")
    logical = (tf.config.get_logical_device_configuration(cpus[0])
               if cpus else None)
    n_cpu = max(1, len(logical or []))
  cores = os.cpu_count() or 1
  cpu = (cores * 2.5e9 * 16 / n_cpu, 20 * GB / n_cpu, _mem_total() / n_cpu)
  prefix = "/job:localhost/replica:0/task:0/device:"
  devices = [_device(f"{prefix}CPU:{i}", cpu, 1e-5,
                     max(1, min(4, cores // n_cpu))) for i in range(n_cpu)]
  for i, gpu in enumerate(tf.config.list_physical_devices("GPU")):
    name = tf.config.experimental.get_device_details(gpu).get("device_name", "")
    devices.append(_device(f"{prefix}GPU:{i}", gpu_figures(name), 5e-6))
  return make_cluster("local" if num_cpus is None else f"local:{num_cpus}",
                      devices, default_link=PCIE3)


def _local_cpus(name: str) -> Optional[int]:
  """N of the preset name "local:N" (N logical CPUs); None for another
  name. Raises ClusterError for "local:" and a count that is not >= 1."""
  if not name.startswith("local:"):
    return None
  count = name[len("local:"):]
  if not count.isdigit() or int(count) < 1:
    raise ClusterError(f"{name!r}: local:N takes a number of logical CPUs "
                       "N >= 1 (e.g. local:2)")
  return int(count)


def _mem_total() -> float:
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith("MemTotal:"):
          return float(line.split()[1]) * 1024
  except OSError:
    pass
  return 8.0 * GB


def gpu_figures(name: str) -> Tuple[float, ...]:
  """(peak FLOP/s, memory bytes/s, memory bytes[, half-precision tensor-core
  FLOP/s]) of a GPU by its name (H100, H200, V100, K80, A100, T4), else a
  V100's."""
  table = {"H100": H100_SXM5, "H200": H200_SXM, "V100": V100_SXM2,
           "K80": K80_GPU, "A100": (19.5e12, 1.56e12, 40 * GB, 312e12),
           "T4": (8.1e12, 320 * GB, 16 * GB, 65e12)}
  for key, figures in table.items():
    if key in name.upper():
      return figures
  return V100_SXM2


_LOCAL_N = "local:N (N logical CPUs)"

PRESETS: Dict[str, Callable[[], Cluster]] = {
    "k80x2": k80x2,
    "k80x4": k80x4,
    "v100x4_nvlink": v100x4_nvlink,
    "h100x8_nvlink": h100x8_nvlink,
    "2hosts_4gpu": two_hosts_4gpu,
    "local": local,
}


def list_presets() -> List[str]:
  """Names of the cluster presets."""
  return list(PRESETS)


@functools.lru_cache(maxsize=None)
def _cached(name: str) -> Cluster:
  return PRESETS[name]()


def preset(name: str) -> Cluster:
  """The preset cluster `name` (or "local:N": `local` with N logical
  CPUs); raises ClusterError if unknown."""
  if _local_cpus(name) is not None:
    return local(_local_cpus(name))
  if name not in PRESETS:
    raise ClusterError(f"unknown cluster preset {name!r}; presets: "
                       f"{', '.join(PRESETS)}, {_LOCAL_N}")
  if name == "local":  # Depends on TF's device configuration: never cached.
    return local()
  return _cached(name)


def load_cluster(name_or_path: str) -> Cluster:
  """A preset by name, or a cluster JSON file by path.

  Raises:
    ClusterError: if it is neither, or the file is malformed.
  """
  if name_or_path in PRESETS or (not os.path.isfile(name_or_path)
                                 and _local_cpus(name_or_path)):
    return preset(name_or_path)
  if os.path.isfile(name_or_path):
    return Cluster.from_json_file(name_or_path)
  if name_or_path.endswith(".json") or os.sep in name_or_path:
    raise ClusterError(
        f"no such cluster file {name_or_path!r} (a `tfplace cluster up` "
        "state file is removed by `tfplace cluster down`); presets: "
        f"{', '.join(PRESETS)}, {_LOCAL_N}")
  raise ClusterError(f"{name_or_path!r} is neither a cluster preset nor a "
                     f"cluster JSON file; presets: {', '.join(PRESETS)}")

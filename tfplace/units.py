"""Human-readable sizes and durations for everything tfplace prints."""


def format_bytes(nbytes: float) -> str:
  """1536 -> "1.5 KiB"; binary units, one decimal; "0 B" for nothing."""
  nbytes = float(nbytes)
  for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                      ("KiB", 2**10)):
    if abs(nbytes) >= scale:
      return f"{nbytes / scale:.1f} {unit}"
  return f"{int(nbytes)} B"


def format_seconds(seconds: float) -> str:
  """0.0123 -> "12.300 ms"; s, ms or µs, whichever reads best."""
  seconds = float(seconds)
  if seconds != seconds or seconds in (float("inf"), float("-inf")):
    return str(seconds)
  if abs(seconds) >= 1.0:
    return f"{seconds:.3f} s"
  if abs(seconds) >= 1e-3:
    return f"{seconds * 1e3:.3f} ms"
  return f"{seconds * 1e6:.1f} µs"

"""Values for a training step's inputs: the user's feeds, or synthetic ones.

`resolve_inputs(graph, feeds, options)` returns the `StepInputs` of one
measurement: for every placeholder a run needs (see `graph_inputs`), either
the user's value (a mapping name -> array, or an input function called once
per run with the run's index) checked against the placeholder's dtype and
static shape, or a synthetic value:

* floating point: standard normal values (a scalar gets 0.5: a scalar float
  input is usually a rate or keep probability);
* integers: uniform in [0, N) where the graph uses them as indices (N: the
  gathered table's rows, the logits' classes, a one-hot depth; see
  `graph_inputs.index_bound`) or where `FeedOptions.index_ranges` gives N,
  else zeros;
* bool: True for a scalar (a training-mode switch), else random;
* unknown dimensions: the first from `FeedOptions.batch_size`, any from
  `FeedOptions.input_shapes`; without them, a `FeedError` names the
  placeholder and the option. Strings, resources and variants cannot be
  made up: they must be fed.

Synthetic values are drawn once (seeded) and fed to every run. The result
also lists the graph's input pipelines (tf.data iterators, queues) and says
for every input where its values came from (`StepInputs.sources`).
"""

import collections.abc
import dataclasses
import hashlib
import zipfile
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tfplace.errors import FeedError
from tfplace.graph.input_shapes import declared_shape
from tfplace.graph.input_shapes import fits as shape_fits
from tfplace.graph.op_graph import OpGraph, StepFetches
from tfplace.measurement import graph_inputs
from tfplace.measurement.graph_inputs import Pipelines, PlaceholderSpec
from tfplace.measurement.timing import InputSource

InputFn = Callable[[int], Mapping[str, Any]]
_FEED_HINT = ("feed it (--feeds FILE.npz, or feeds= in tfplace.measure)")


@dataclasses.dataclass(frozen=True)
class FeedOptions:
  """How synthetic input values are made.

  Attributes:
    batch_size: size of an unknown first dimension of a placeholder.
    input_shapes: placeholder name -> full shape, for placeholders with
      unknown dimensions (overrides `batch_size`).
    index_ranges: integer placeholder name -> N: its values are drawn from
      [0, N) (overrides what the graph implies).
    seed: seed of the synthetic values.
  """
  batch_size: Optional[int] = None
  input_shapes: Mapping[str, Tuple[int, ...]] = dataclasses.field(
      default_factory=dict)
  index_ranges: Mapping[str, int] = dataclasses.field(default_factory=dict)
  seed: int = 0

  def __post_init__(self):
    if self.batch_size is not None and self.batch_size < 1:
      raise FeedError(f"batch_size must be >= 1, got {self.batch_size}")
    for name, shape in self.input_shapes.items():
      if any(int(d) < 0 for d in shape):
        raise FeedError(f"input shape of {name!r} has a negative "
                        f"dimension: {tuple(shape)}")
    for name, n in self.index_ranges.items():
      if int(n) < 1:
        raise FeedError(f"index range of {name!r} must be >= 1, got {n}")


@dataclasses.dataclass(frozen=True)
class StepInputs:
  """Everything a run feeds or starts besides the graph's own ops.

  Attributes:
    values: tensor name ("x:0") -> the fixed value fed to every run.
    placeholders: every placeholder a run needs, or the user feeds.
    input_fn: the user's input function (called with the run index), or
      None.
    pipelines: the graph's iterators and queues to initialize or fill.
    fill_step: the step reads an iterator or queue: one untimed step fills
      its buffers before timing, whatever the warmup.
    sources: where each input's values come from.
  """
  values: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
  placeholders: Tuple[PlaceholderSpec, ...] = ()
  input_fn: Optional[InputFn] = None
  pipelines: Pipelines = Pipelines()
  fill_step: bool = False
  sources: Tuple[InputSource, ...] = ()

  def feed_dict(self, run: int) -> Dict[str, np.ndarray]:
    """The feeds of run number `run` (0: the init run).

    Raises:
      FeedError: the input function gave a value that does not fit.
    """
    if self.input_fn is None:
      return dict(self.values)
    out = dict(self.values)
    out.update(_check_user_feeds(self.input_fn(run), self._specs()))
    return out

  def _specs(self) -> Dict[str, PlaceholderSpec]:
    return {p.name: p for p in self.placeholders}

  @property
  def kinds(self) -> Tuple[str, ...]:
    """The distinct sources ("synthetic", "user", "pipeline"), sorted."""
    return tuple(sorted({s.source for s in self.sources}))

  def describe(self) -> List[str]:
    """One line per input (empty: the graph makes its own inputs)."""
    return [s.describe() for s in self.sources]

  def fingerprint(self) -> str:
    """A hash of what is fed ("" when nothing is), for cache keys."""
    if not self.sources:
      return ""
    h = hashlib.sha256()
    for s in self.sources:
      h.update(repr((s.name, s.source, s.dtype, s.shape, s.how)).encode())
    for name in sorted(self.values):
      h.update(name.encode() + np.ascontiguousarray(
          self.values[name]).tobytes())
    if self.input_fn is not None:
      h.update(repr(getattr(self.input_fn, "__qualname__",
                            self.input_fn)).encode())
    return h.hexdigest()[:16]


def resolve_inputs(graph: OpGraph, feeds=None,
                   options: Optional[FeedOptions] = None,
                   fetches: Optional[StepFetches] = None) -> StepInputs:
  """The inputs of a measurement of `graph`.

  Args:
    graph: the training step.
    feeds: None (synthetic values for every placeholder), a mapping
      placeholder name -> array, an input function `run -> mapping`
      (called once per run, outside the timed region), or `StepInputs`
      (returned as is). Placeholders the user does not feed get synthetic
      values.
    options: how synthetic values are made.
    fetches: what a step runs (default: `graph_inputs.step_fetches(graph)`).

  Raises:
    FeedError: a feed names no placeholder or does not fit it, an option
      names no placeholder, or no synthetic value can be made.
  """
  if isinstance(feeds, StepInputs):
    return feeds
  options = options or FeedOptions()
  fetches = fetches or graph_inputs.step_fetches(graph)
  pipes = graph_inputs.pipelines(graph, fetches)
  needed = graph_inputs.placeholders(
      graph, graph_inputs.needed_names(graph, fetches, pipes))
  user, input_fn = _user_values(graph, feeds)
  _check_options(options, needed)
  specs = {p.name: p for p in needed}
  specs.update({name: spec for name, (spec, _) in user.items()})
  values = {f"{n}:0": v for n, (_, v) in user.items()} if not input_fn else {}
  how = "the user's input function" if input_fn else "the user's feeds"
  sources = [InputSource(n, "user", s.dtype, tuple(np.shape(v)), how)
             for n, (s, v) in sorted(user.items())]
  synthetic = _synthesize([p for p in needed if p.name not in user], graph,
                          options)
  for spec, value, text in synthetic:
    values[f"{spec.name}:0"] = value
    sources.append(InputSource(spec.name, "synthetic", spec.dtype,
                               tuple(value.shape), text))
  sources += [InputSource(name, "pipeline", how=text)
              for name, text in pipes.sources]
  return StepInputs(values=values, placeholders=tuple(specs.values()),
                    input_fn=input_fn, pipelines=pipes,
                    fill_step=graph_inputs.reads_pipeline(graph, fetches),
                    sources=tuple(sources))


def _user_values(graph: OpGraph, feeds):
  """({name: (spec, checked array)}, input function or None)."""
  if feeds is None:
    return {}, None
  input_fn = (feeds if callable(feeds)
              and not isinstance(feeds, collections.abc.Mapping) else None)
  first = input_fn(0) if input_fn else feeds
  if not isinstance(first, collections.abc.Mapping):
    raise FeedError(f"feeds must be a mapping name -> array or a function "
                    f"returning one; got {type(first).__name__}")
  specs = {}
  for key in first:
    spec = feedable_spec(graph, key)
    specs[spec.name] = spec
  checked = _check_user_feeds(first, specs)
  return {name: (spec, checked[f"{name}:0"])
          for name, spec in specs.items()}, input_fn


def feedable_spec(graph: OpGraph, key: str) -> PlaceholderSpec:
  """The placeholder a feed key ("x" or "x:0") names.

  Raises:
    FeedError: no such op, or it is not a placeholder.
  """
  import tensorflow as tf
  name, _, index = str(key).partition(":")
  if name not in graph.index:
    raise FeedError(f"feed {key!r}: the graph has no op {name!r}")
  node = graph.graph_def.node[graph.index[name]]
  if node.op not in graph_inputs.FEEDABLE_OPS or index not in ("", "0"):
    hint = ("; a tf.function's arguments are constants of its imported "
            "step: give their values at import, import_graph(fn, args=...)"
            if node.op == "Const" else "")
    raise FeedError(f"feed {key!r}: {name!r} is a {node.op} op, not a "
                    f"placeholder; only placeholders can be fed{hint}")
  return PlaceholderSpec(name, tf.as_dtype(node.attr["dtype"].type).name,
                         declared_shape(node))


def _check_user_feeds(feeds: Mapping[str, Any],
                      specs: Mapping[str, PlaceholderSpec]
                      ) -> Dict[str, np.ndarray]:
  """{"name:0": array} after checking each against its placeholder."""
  out = {}
  for key, value in feeds.items():
    name = str(key).partition(":")[0]
    if name not in specs:
      raise FeedError(f"feed {key!r} names no placeholder of the step "
                      f"(placeholders: {sorted(specs) or 'none'})")
    out[f"{name}:0"] = check_feed(specs[name], value)
  return out


def check_feed(spec: PlaceholderSpec, value) -> np.ndarray:
  """`value` as an array, if its dtype and shape fit the placeholder.

  Raises:
    FeedError: wrong dtype or shape.
  """
  import tensorflow as tf
  array = np.asarray(value)
  want = np.dtype(tf.as_dtype(spec.dtype).as_numpy_dtype)
  if spec.dtype == "string":
    fits = array.dtype.kind in "SUO"  # bytes, str or objects
  else:
    fits = array.dtype == want
  if not fits:
    raise FeedError(f"feed {spec.name!r} has dtype {array.dtype}; the "
                    f"placeholder takes {spec.dtype} (convert it, e.g. "
                    f"array.astype(np.{want.name}))")
  if not shape_fits(spec.shape, array.shape):
    raise FeedError(f"feed {spec.name!r} has shape {list(array.shape)}; the "
                    f"placeholder's shape is {spec.shape_text()}")
  return array


def _check_options(options: FeedOptions,
                   needed: Sequence[PlaceholderSpec]) -> None:
  names = {p.name for p in needed}
  for what, given in (("input_shapes", options.input_shapes),
                      ("index_ranges", options.index_ranges)):
    unknown = sorted(set(given) - names)
    if unknown:
      raise FeedError(f"{what} names {unknown}, not placeholders the step "
                      f"needs ({sorted(names) or 'none'})")


def _synthesize(specs: Sequence[PlaceholderSpec], graph: OpGraph,
                options: FeedOptions
                ) -> List[Tuple[PlaceholderSpec, np.ndarray, str]]:
  """(spec, value, how) for each placeholder nobody feeds."""
  rng = np.random.default_rng(options.seed)
  tf_graph = []  # imported once, only if an integer input needs its bound

  def bound_of(name: str) -> Tuple[Optional[int], str]:
    if not tf_graph:
      from tfplace.measurement.session import import_graph_def
      tf_graph.append(import_graph_def(graph.graph_def))
    return graph_inputs.index_bound(tf_graph[0], name)

  return [(spec,) + synthetic_value(spec, concrete_shape(spec, options),
                                    options, rng, bound_of)
          for spec in specs]


def concrete_shape(spec: PlaceholderSpec,
                   options: FeedOptions) -> Tuple[int, ...]:
  """The shape to synthesize for `spec`.

  Raises:
    FeedError: a dimension is unknown and no option gives it, or the given
      shape does not fit.
  """
  given = options.input_shapes.get(spec.name)
  if given is not None:
    given = tuple(int(d) for d in given)
    if not shape_fits(spec.shape, given):
      raise FeedError(f"input shape {list(given)} given for {spec.name!r} "
                      f"does not fit its shape {spec.shape_text()}")
    return given
  example = f"--input_shapes {spec.name}=D0xD1x..."
  if spec.shape is None:
    raise FeedError(f"placeholder {spec.name!r} ({spec.dtype}) has an "
                    f"unknown rank: give its shape ({example}, or "
                    f"FeedOptions.input_shapes), or {_FEED_HINT}")
  dims = []
  for k, d in enumerate(spec.shape):
    if d is None and k == 0 and options.batch_size:
      d = options.batch_size
    if d is None:
      batch = ("--batch_size N (FeedOptions.batch_size) or "
               if k == 0 else "")
      raise FeedError(
          f"placeholder {spec.name!r} ({spec.dtype}{spec.shape_text()}) has "
          f"an unknown dimension {k}: give {batch}{example} "
          f"(FeedOptions.input_shapes), or {_FEED_HINT}")
    dims.append(int(d))
  return tuple(dims)


def synthetic_value(spec: PlaceholderSpec, shape: Tuple[int, ...],
                    options: FeedOptions, rng: np.random.Generator,
                    bound_of: Callable[[str], Tuple[Optional[int], str]]
                    ) -> Tuple[np.ndarray, str]:
  """(value, how it was made) for one placeholder (see the module doc).

  Raises:
    FeedError: the dtype has no synthetic value (strings, handles).
  """
  import tensorflow as tf
  dtype = tf.as_dtype(spec.dtype)
  np_dtype = np.dtype(dtype.as_numpy_dtype)
  if dtype.is_floating or dtype.is_complex:
    if not shape:
      return np.asarray(0.5, dtype=np_dtype), "0.5 (a scalar: a rate?)"
    return (rng.standard_normal(shape).astype(np_dtype),
            "standard normal values")
  if dtype.is_integer:
    return _integer_value(spec, shape, options, rng, bound_of, np_dtype)
  if dtype.is_bool:
    if not shape:
      return np.asarray(True), "True (a scalar: a training-mode switch?)"
    return rng.random(shape) < 0.5, "random True/False"
  raise FeedError(f"placeholder {spec.name!r} has dtype {spec.dtype}: no "
                  f"synthetic value can be made; {_FEED_HINT}")


def _integer_value(spec, shape, options, rng, bound_of, np_dtype):
  given = options.index_ranges.get(spec.name)
  if given is not None:
    bound, why = int(given), "the range given for it"
  else:
    bound, why = bound_of(spec.name)
  if bound is None:
    return (np.zeros(shape, dtype=np_dtype),
            f"zeros (not used as an index; give --index_ranges "
            f"{spec.name}=N for values in [0, N))")
  if bound < 1:
    raise FeedError(f"placeholder {spec.name!r} indexes an empty dimension "
                    f"({why}): no valid value; {_FEED_HINT}")
  return (rng.integers(0, bound, size=shape).astype(np_dtype),
          f"uniform integers in [0, {bound}): {why}")


# ---- files and command-line values ---------------------------------------


def load_feeds(path: str) -> Dict[str, np.ndarray]:
  """The arrays of an .npz file (`np.savez`): name -> array.

  Raises:
    FeedError: no such file, or not an .npz of arrays.
  """
  try:
    data = np.load(path, allow_pickle=False)
    if not isinstance(data, np.lib.npyio.NpzFile):
      raise FeedError(f"{path} is not an .npz file (np.savez); it holds "
                      "one array")
    with data:
      arrays = {name: data[name] for name in data.files}
  except FileNotFoundError:
    raise FeedError(f"no such feeds file: {path}") from None
  except IsADirectoryError:
    raise FeedError(f"feeds file {path} is a directory") from None
  except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
    raise FeedError(f"{path} is not an .npz file of arrays (np.savez): "
                    f"{e}") from None
  if not arrays:
    raise FeedError(f"{path} holds no arrays")
  return arrays


def parse_index_ranges(entries: Sequence[str]) -> Dict[str, int]:
  """["labels=10"] -> {"labels": 10}."""
  out = {}
  for entry in entries:
    name, sep, value = entry.partition("=")
    if not sep or not name or not value.isdigit() or int(value) < 1:
      raise FeedError(f"--index_ranges entry {entry!r} is not NAME=N with "
                      "N >= 1 (e.g. labels=10)")
    out[name] = int(value)
  return out

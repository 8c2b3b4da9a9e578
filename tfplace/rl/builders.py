"""Assembles a learned search: units, codec, evaluator, environment, networks.

`colocrl_setup`, `gdp_setup`, `mars_setup` and `hierarchical_setup` take a placement
problem (anything with `graph`, `cluster`, `groups` (the colocation
`GroupGraph`) and `simulate_groups`) and a start placement, and return the
`LearnedSetup` the search loop runs.
"""

import dataclasses
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec

from tfplace.grouping.memory import MemoryBudget
from tfplace.grouping import chunks
from tfplace.rl import features as features_lib
from tfplace.rl.environments.codecs import HierarchicalCodec, UnitCodec
from tfplace.rl.environments.evaluator import GroupMemory, PlacementEvaluator
from tfplace.rl.environments.placement_environment import PlacementEnvironment
from tfplace.rl.environments.rewards import RewardConfig
from tfplace.rl.search import LearnedSetup


@dataclasses.dataclass(frozen=True)
class EnvConfig:
  """The environment and network sizes.

  Attributes:
    batch_size: placements per policy call (one `simulate_batch` each).
    reward: the reward shaping.
    memory_rule: "repair" or "penalty" (see `environments.evaluator`).
    hidden: width of the policy network (the seq2seq LSTMs; gdp: its graph
      embedding and attention).
    num_chunks: ColocRL: topological chunks before the split by device.
    num_groups: hierarchical: N, the grouper's groups (0: min(256, 20 D)).
    shared_logits: the networks give one logits table for the whole batch
      (REINFORCE) rather than per-sample logits (PPO needs those).
    bias_scale: speed of the per-unit logit biases (`heads.RowBias`).
  """
  batch_size: int = 32
  reward: RewardConfig = RewardConfig()
  memory_rule: str = "repair"
  hidden: int = 64
  num_chunks: int = 64
  num_groups: int = 0
  shared_logits: bool = True
  bias_scale: float = 30.0


def group_memory(problem) -> GroupMemory:
  """Group sizes and device capacities (the `MemoryBudget` estimate), and
  where each group may go: a kernel for every member, and parameters no
  larger than the device's memory."""
  groups = problem.groups
  budget = MemoryBudget(groups, problem.cluster)
  fits = groups.param_bytes[:, None] <= budget.capacity[None]
  return GroupMemory(budget.need, budget.capacity, groups.allowed & fits)


def _environment(problem, codec, reference_s: float,
                 config: EnvConfig) -> PlacementEnvironment:
  evaluator = PlacementEvaluator(problem.simulate_groups, group_memory(problem),
                                 config.memory_rule)
  return PlacementEnvironment(codec, evaluator, reference_s, config.batch_size,
                              config.reward)


def signature(problem, kind: str, extra: Optional[Dict[str, object]],
              **fields) -> Dict[str, object]:
  """A learned search's checkpoint signature: the problem's identity
  (graph, cluster, groups), the placer `kind`, its `fields`, then `extra`."""
  out = {
      "placer": kind, "graph": problem.graph.fingerprint,
      "num_ops": problem.graph.num_ops,
      "cluster": list(problem.cluster.device_names),
      "num_groups": problem.groups.num_groups, **fields}
  out.update(extra or {})
  return out


def chunk_units(problem, start_devices: np.ndarray, num_chunks: int):
  """ColocRL's (and Placeto's) units: topological chunks of the colocation
  groups split by the start placement's devices. Returns (the units' group
  graph, int32 [G] unit of each colocation group, numbered as that graph
  numbers them)."""
  return chunks.unit_group_graph(
      problem.graph, problem.costs, problem.groups,
      chunks.units(problem.groups, start_devices, num_chunks))


def _one_shot_setup(problem, kind: str, env: PlacementEnvironment, actor,
                    values: np.ndarray, start_devices: np.ndarray,
                    start_step_time_s: float,
                    extra: Optional[Dict[str, object]],
                    hidden: int) -> LearnedSetup:
  """The `LearnedSetup` of a one-shot placer (value network on `values`);
  the network's width joins the signature (a checkpoint of another width
  cannot be read)."""
  from tfplace.rl.networks.value_network import GraphValueNetwork
  obs_spec = tensor_spec.from_spec(env.observation_spec())
  shapes = [[*spec.shape, int(spec.maximum) + 1]
            for spec in tf.nest.flatten(env.action_spec())]
  return LearnedSetup(
      env=env, actor_net=actor, value_net=GraphValueNetwork(obs_spec, values),
      start_devices=np.asarray(start_devices, np.int32),
      start_step_time_s=float(start_step_time_s),
      signature=signature(problem, kind, extra, action=shapes,
                          hidden=int(hidden)))


def _unit_environment(problem, start_devices: np.ndarray,
                      start_step_time_s: float, config: EnvConfig,
                      vocabulary=None):
  """ColocRL's units (`chunk_units`), their features (op-type histogram over
  `vocabulary`; none: the graph's most frequent types) and environment.
  Returns (unit graph, features [U, F], environment, observation spec)."""
  memory = group_memory(problem)
  unit_graph, unit_of = chunk_units(problem, start_devices, config.num_chunks)
  values = features_lib.group_features(problem.graph, unit_graph,
                                       vocabulary).values
  env = _environment(problem, UnitCodec(unit_of, memory.allowed),
                     start_step_time_s, config)
  return unit_graph, values, env, tensor_spec.from_spec(
      env.observation_spec())


def _graph_network_setup(problem, kind: str, network_class,
                         start_devices: np.ndarray, start_step_time_s: float,
                         config: EnvConfig,
                         network_sizes: Optional[Dict[str, int]],
                         extra_signature: Optional[Dict[str, object]],
                         vocabulary=None, **network_kwargs) -> LearnedSetup:
  """A one-shot placer whose network reads the unit graph's edges (gdp,
  mars): `network_class(obs_spec, action_spec, features, edge_src, edge_dst,
  topological order, hidden, ..., **network_sizes, **network_kwargs)` over
  ColocRL's units; the sizes join the checkpoint signature."""
  sizes = dict(network_sizes or {})
  unit_graph, values, env, obs_spec = _unit_environment(
      problem, start_devices, start_step_time_s, config, vocabulary)
  actor = network_class(obs_spec, tensor_spec.from_spec(env.action_spec()),
                        values, unit_graph.edge_src, unit_graph.edge_dst,
                        unit_graph.topo_order(), config.hidden,
                        shared_logits=config.shared_logits,
                        bias_scale=config.bias_scale, **sizes,
                        **network_kwargs)
  return _one_shot_setup(problem, kind, env, actor, values, start_devices,
                         start_step_time_s,
                         {**sizes, **(extra_signature or {})}, config.hidden)


def colocrl_setup(problem, start_devices: np.ndarray, start_step_time_s: float,
                  config: EnvConfig = EnvConfig(),
                  extra_signature: Optional[Dict[str, object]] = None
                  ) -> LearnedSetup:
  """ColocRL: units = topological chunks split by the start placement."""
  from tfplace.rl.networks.seq2seq_placer import Seq2SeqPlacerNetwork
  unit_graph, values, env, obs_spec = _unit_environment(
      problem, start_devices, start_step_time_s, config)
  actor = Seq2SeqPlacerNetwork(obs_spec, tensor_spec.from_spec(
      env.action_spec()), values, unit_graph.topo_order(), config.hidden,
                                 shared_logits=config.shared_logits,
                                 bias_scale=config.bias_scale)
  return _one_shot_setup(problem, "colocrl", env, actor, values, start_devices,
                         start_step_time_s, extra_signature, config.hidden)


def gdp_setup(problem, start_devices: np.ndarray, start_step_time_s: float,
              config: EnvConfig = EnvConfig(),
              network_sizes: Optional[Dict[str, int]] = None,
              extra_signature: Optional[Dict[str, object]] = None,
              share_weights_with=None) -> LearnedSetup:
  """GDP over ColocRL's units (`config.num_chunks` chunks split by the start
  placement; every colocation group its own unit when num_chunks >= G),
  with features over `features.SHARED_VOCABULARY`, so that the network's
  weights mean the same on every graph (`tfplace.rl.transfer`).

  Args:
    network_sizes: keyword arguments of `GDPNetwork` (sage_layers,
      attention_layers, heads, segment_length); they join the checkpoint
      signature.
    share_weights_with: another graph's `GDPNetwork` whose graph-independent
      weights this setup's network uses (batch training over several graphs,
      `tfplace.rl.batch_training`); None: its own.
  """
  from tfplace.rl.networks.gdp_network import GDPNetwork
  return _graph_network_setup(problem, "gdp", GDPNetwork, start_devices,
                              start_step_time_s, config, network_sizes,
                              extra_signature, features_lib.SHARED_VOCABULARY,
                              share_weights_with=share_weights_with)


def mars_setup(problem, start_devices: np.ndarray, start_step_time_s: float,
               config: EnvConfig = EnvConfig(),
               network_sizes: Optional[Dict[str, int]] = None,
               extra_signature: Optional[Dict[str, object]] = None
               ) -> LearnedSetup:
  """Mars over ColocRL's units (`config.num_chunks` chunks split by the
  start placement).

  Args:
    network_sizes: keyword arguments of `MarsNetwork` (gcn_layers,
      segment_length); they join the checkpoint signature.
  """
  from tfplace.rl.networks.mars_network import MarsNetwork
  return _graph_network_setup(problem, "mars", MarsNetwork, start_devices,
                              start_step_time_s, config, network_sizes,
                              extra_signature)


def hierarchical_setup(problem, start_devices: np.ndarray,
                       start_step_time_s: float,
                       config: EnvConfig = EnvConfig(),
                       extra_signature: Optional[Dict[str, object]] = None
                       ) -> LearnedSetup:
  """The hierarchical planner over the colocation groups."""
  from tfplace.rl.networks.hierarchical_network import HierarchicalNetwork
  groups = problem.groups
  memory = group_memory(problem)
  num = config.num_groups or min(256, 20 * problem.cluster.num_devices)
  values = features_lib.group_features(problem.graph, groups).values
  codec = HierarchicalCodec(memory.allowed, num,
                            features_lib.topo_position(groups))
  env = _environment(problem, codec, start_step_time_s, config)
  obs_spec = tensor_spec.from_spec(env.observation_spec())
  actor = HierarchicalNetwork(obs_spec, tensor_spec.from_spec(
      env.action_spec()), values, config.hidden,
                                 shared_logits=config.shared_logits,
                                 bias_scale=config.bias_scale)
  return _one_shot_setup(problem, "hierarchical", env, actor, values,
                         start_devices, start_step_time_s, extra_signature,
                         config.hidden)

"""The agents: tf-agents' REINFORCE and PPO-clip, configured for placement.

  * ``reinforce``: `ReinforceAgent` (Williams, 1992), the algorithm of both
    ColocRL and the hierarchical planner. Baseline ``moving_average`` (the
    papers': an exponential moving average of the reward) or ``value`` (a
    value network regressed on the rewards); either way the advantage is
    divided by a moving average of the reward's standard deviation, so one
    learning rate fits every graph and reward shaping. Baseline
    ``per_step``: the mean return of the batch's episodes at the same time
    step (episodes of a batch run in lock step; Placeto's multi-step
    episodes, whose returns depend on the step), scaled the same way.
  * ``ppo``: `PPOClipAgent` (Schulman et al., 2017) with a value network.
    tf-agents sums log-probabilities over action dimensions, so the
    importance ratio of a placement of U units is a product of U factors; by
    default (``ppo_ratio="per_unit"``) the ratio is the geometric mean of the
    per-unit ratios, exp((log pi - log pi_old) / U), clipped to 1 +- eps, and
    the objective is multiplied by U so that its gradient at ratio 1 is the
    joint policy gradient. ``ppo_ratio="joint"`` keeps tf-agents' product.
    tf-agents' default `importance_ratio_clipping` is 0 (no clipping); here
    it is `ppo_clip` (0.2). Its epochs are unrolled into the train graph, so
    keep `ppo_epochs` small. Observation normalization is off (the
    observation is the mask).
"""

import dataclasses
from typing import Optional, Tuple

import tensorflow as tf
from tf_agents.agents.ppo import ppo_clip_agent
from tf_agents.agents.reinforce import reinforce_agent
from tf_agents.utils import common

from tfplace.errors import PlacementError

AGENTS = ("reinforce", "ppo")
BASELINES = ("moving_average", "value", "per_step")
PPO_RATIOS = ("per_unit", "joint")
DEFAULT_LR = {"reinforce": 3e-3, "ppo": 2e-3}


@dataclasses.dataclass(frozen=True)
class AgentConfig:
  """The agent and its training hyperparameters.

  Attributes:
    kind: "reinforce" or "ppo".
    baseline: REINFORCE's baseline, "moving_average", "value" or
      "per_step".
    lr: Adam learning rate; None: `DEFAULT_LR` of the agent (PPO at 1e-2
      collapses; 2e-3 is stable).
    entropy_regularization: weight of the entropy bonus (per unit, summed).
    baseline_decay: decay of the reward moving averages.
    ppo_clip: PPO's importance ratio clipping epsilon.
    ppo_epochs: PPO's epochs per batch.
    ppo_ratio: "per_unit" (geometric mean of unit ratios) or "joint".
    gradient_clipping: global gradient norm clip (0: none).
  """
  kind: str = "reinforce"
  baseline: str = "moving_average"
  lr: Optional[float] = None
  entropy_regularization: float = 0.0
  baseline_decay: float = 0.9
  ppo_clip: float = 0.2
  ppo_epochs: int = 3
  ppo_ratio: str = "per_unit"
  gradient_clipping: float = 1.0

  def __post_init__(self):
    for value, valid, what in ((self.kind, AGENTS, "agent"),
                               (self.baseline, BASELINES, "baseline"),
                               (self.ppo_ratio, PPO_RATIOS, "ppo_ratio")):
      if value not in valid:
        raise PlacementError(f"unknown {what} {value!r}; choose one of "
                             f"{list(valid)}")
    if not self.learning_rate > 0 or not 0 <= self.baseline_decay < 1:
      raise PlacementError("lr must be > 0 and baseline_decay in [0, 1)")
    if not self.ppo_clip > 0 or self.ppo_epochs < 1:
      raise PlacementError("ppo_clip must be > 0 and ppo_epochs >= 1")


  @property
  def learning_rate(self) -> float:
    return self.lr if self.lr is not None else DEFAULT_LR[self.kind]


class RewardStats(tf.Module):
  """Moving averages of the reward's mean and variance (checkpointed)."""

  def __init__(self, decay: float, name: str = "reward_stats"):
    super().__init__(name=name)
    self.decay = decay
    self.mean = tf.Variable(0.0, dtype=tf.float32, name="mean")
    self.variance = tf.Variable(1.0, dtype=tf.float32, name="variance")
    self.initialized = tf.Variable(False, name="initialized")

  def start_at(self, reward: float) -> None:
    """Starts the mean at `reward` (the start placement's)."""
    self.mean.assign(reward)
    self.variance.assign(1e-4)
    self.initialized.assign(True)

  def update(self, rewards) -> None:
    rewards = tf.cast(rewards, tf.float32)
    mean = tf.reduce_mean(rewards)
    var = tf.math.reduce_variance(rewards)
    if not bool(self.initialized.numpy()):
      self.mean.assign(mean)
      self.variance.assign(var)
      self.initialized.assign(True)
      return
    d = self.decay
    self.variance.assign(d * self.variance + (1 - d) * (
        var + tf.square(mean - self.mean)))
    self.mean.assign(d * self.mean + (1 - d) * mean)

  def scale(self) -> tf.Tensor:
    return tf.sqrt(self.variance) + 1e-6


class PerUnitPPOClipAgent(ppo_clip_agent.PPOClipAgent):
  """PPO-clip whose ratio is the geometric mean over action dimensions."""

  def __init__(self, *args, num_units: int, **kwargs):
    self._num_units = float(num_units)
    super().__init__(*args, **kwargs)

  def policy_gradient_loss(self, time_steps, actions, sample_action_log_probs,
                           advantages, current_policy_distribution, weights,
                           debug_summaries=False):
    del time_steps, debug_summaries
    log_prob = tf.cast(common.log_probability(
        current_policy_distribution, actions, self._action_spec), tf.float32)
    ratio = tf.exp((log_prob - sample_action_log_probs) / self._num_units)
    eps = self._importance_ratio_clipping
    objective = tf.minimum(ratio * advantages,
                           tf.clip_by_value(ratio, 1 - eps, 1 + eps) * advantages)
    self._clip_fraction = tf.reduce_mean(
        tf.cast(tf.abs(ratio - 1.0) > eps, tf.float32))
    return -self._num_units * tf.reduce_sum(objective * weights) / (
        tf.reduce_sum(weights) + 1e-8)


def per_step_advantages(returns: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
  """Returns [B, T] minus their batch mean at each time step, over `scale`."""
  return (returns - tf.reduce_mean(returns, axis=0, keepdims=True)) / scale


def make_optimizer(config: AgentConfig):
  """Adam at the configured learning rate."""
  return tf.keras.optimizers.Adam(learning_rate=config.learning_rate)


def make_agent(time_step_spec, action_spec, actor_net, value_net,
               config: AgentConfig, num_units: int,
               train_step: Optional[tf.Variable] = None,
               optimizer=None) -> Tuple[object, RewardStats]:
  """Builds the agent.

  Args:
    time_step_spec: the environment's time step spec (tensor specs).
    action_spec: its action spec (tensor specs).
    actor_net: the policy network (returns a distribution).
    value_net: the value network (used by "value" and PPO).
    config: the agent configuration.
    num_units: action dimensions (for the per-unit PPO ratio).
    train_step: the train step counter (created if None).
    optimizer: the optimizer (`make_optimizer(config)` if None).

  Returns:
    (the initialized agent, its reward statistics).
  """
  stats = RewardStats(config.baseline_decay)
  train_step = train_step if train_step is not None else tf.Variable(
      0, dtype=tf.int64, name="train_step")
  clip = config.gradient_clipping or None
  optimizer = optimizer or make_optimizer(config)
  if config.kind == "reinforce":
    use_value = config.baseline == "value"
    if use_value:
      advantage_fn = lambda r, v: (r - v) / stats.scale()
    elif config.baseline == "per_step":
      advantage_fn = lambda r, _: per_step_advantages(r, stats.scale())
    else:
      advantage_fn = lambda r, _: (r - stats.mean) / stats.scale()
    agent = reinforce_agent.ReinforceAgent(
        time_step_spec, action_spec, actor_network=actor_net,
        optimizer=optimizer,
        value_network=value_net if use_value else None,
        value_estimation_loss_coef=0.2, advantage_fn=advantage_fn,
        normalize_returns=False, gradient_clipping=clip,
        entropy_regularization=config.entropy_regularization or None,
        train_step_counter=train_step)
  else:
    if getattr(actor_net, "shared_logits", False):
      raise PlacementError("PPO logs every sample's logits: build the actor "
                           "network with shared_logits=False")
    cls = (PerUnitPPOClipAgent if config.ppo_ratio == "per_unit"
           else ppo_clip_agent.PPOClipAgent)
    extra = {"num_units": num_units} if config.ppo_ratio == "per_unit" else {}
    agent = cls(
        time_step_spec, action_spec, optimizer=optimizer,
        actor_net=actor_net, value_net=value_net,
        importance_ratio_clipping=config.ppo_clip, discount_factor=1.0,
        entropy_regularization=config.entropy_regularization,
        num_epochs=config.ppo_epochs, use_gae=False,
        normalize_rewards=False, normalize_observations=False,
        gradient_clipping=config.gradient_clipping,
        train_step_counter=train_step, **extra)
  agent.initialize()
  return agent, stats

"""PPOConfig: every PPO setting, one line of documentation each (CleanRL's names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surreal.api.bounds import bounded, require
from surreal.api.config import Config
from surreal.api.core import LearnerConfig
from surreal.api.device import GPU_MIN_MINIBATCH, pays
from surreal.api.recipe import OnPolicy
from surreal.api.registry import load_class
from surreal.api.spaces import EnvInfo


@dataclass
class PPOConfig(LearnerConfig):
    """Proximal Policy Optimization (clipped surrogate or adaptive KL penalty)."""

    lr: float = 3e-4
    """Adam learning rate (annealed linearly to 0 over run.steps when anneal_lr)."""
    anneal_lr: bool = True
    """Linearly anneal the learning rate to 0 over the run."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = bounded(0.95, ge=0, le=1)
    """GAE lambda."""
    batch_size: int = bounded(512, ge=0)
    """Env steps per learner iteration, whatever the actor count (CleanRL's and SB3's
    convention): segments x actor.rollout_length x env.num_envs, so a multiple of one segment
    (8 envs x 32 steps = 256 by default); 512 is two actors' segments. 0: one segment per actor
    (the batch grows with --actors)."""
    update_epochs: int = bounded(4, ge=0)
    """Passes over each batch (MuJoCo tasks: 10)."""
    num_minibatches: int = bounded(4, ge=1)
    """Minibatches per pass (MuJoCo tasks: 32)."""
    minibatch_size: int = bounded(0, ge=0)
    """Samples per minibatch (ppo: env steps; ppo-vision: sub-trajectories), overriding
    num_minibatches; 0: batch_size / num_minibatches."""
    loss: str = "clip"
    """'clip' (clipped surrogate) or 'kl' (adaptive KL penalty, the original PPO's variant)."""
    clip_coef: float = bounded(0.2, gt=0)
    """Surrogate clipping coefficient."""
    anneal_clip: bool = False
    """Anneal the surrogate's clip range linearly to 0 over run.steps, as the SB3 zoo's tuned
    CartPole PPO does (the value clip keeps clip_coef)."""
    kl_coef: float = 1.0
    """Initial KL penalty coefficient (loss='kl'); adapted towards kl_target after each batch."""
    clip_vloss: bool = True
    """Clip the value loss around the old values, as in the PPO implementation details."""
    ent_coef: float = bounded(0.0, ge=0)
    """Entropy bonus coefficient."""
    vf_coef: float = bounded(0.5, ge=0)
    """Value loss coefficient."""
    max_grad_norm: float = bounded(0.5, ge=0)
    """Global gradient norm clip."""
    target_kl: float | None = bounded(None, gt=0)
    """Stop the epochs of an update early once approx KL exceeds this (also the KL target)."""
    norm_adv: bool = True
    """Normalize advantages per minibatch."""
    norm_obs: bool = True
    """Normalize observations with a running mean/std shipped with the parameters."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the policy and value MLPs."""
    activation: str = "tanh"
    """'tanh' or 'relu'."""
    log_std_init: float = 0.0
    """Initial log standard deviation of the Gaussian policy (continuous actions; the SB3 zoo's
    HalfCheetah PPO starts at -2: less noise on a task where the mean action matters)."""
    model: str = ""
    """A network of your own, `path/to/file.py:Class` built as `Class(env_info, config)` (see
    `surreal.algos.ppo.networks.make_model`); empty: the MLP actor-critic below."""
    network: str = "mlp"
    """'mlp' (the vision model, 'conv_lstm', is the algorithm `ppo-vision`)."""
    lstm_size: int = bounded(100, ge=1)
    """ppo-vision: LSTM hidden units of the conv_lstm network."""
    image_size: int = bounded(84, ge=1)
    """ppo-vision: height and width of the camera image (env.robosuite.camera_size)."""
    bptt_length: int = bounded(0, ge=0)
    """ppo-vision: backpropagate through sub-trajectories of this many steps (0: whole segment)."""

    @classmethod
    def family_defaults(cls, family: str) -> dict[str, Any]:
        """Settings `surreal launch` applies for a task family before the user's `--set`
        (`surreal.algos.families`; measured in bench/reports/learning.md).

        classic (CartPole, Acrobot, ...): no observation normalization (the running statistics
        narrow as the pole is balanced, and normalized inputs clipped at 10 std made the return
        fall), and the SB3 zoo's tuned CartPole PPO otherwise: lr 1e-3 and the surrogate's clip
        range both annealed to 0 (a solved policy drifted off 500 late in a run without the
        clip annealing), gamma 0.98,
        GAE lambda 0.8, 20 epochs over 1,024-step batches (the 4-actor batch the recipe was
        measured with: 4 minibatches of 256, as many gradient steps per sample as the zoo's
        8 x 32 batches of 256, whatever the actor count), and, as in the zoo
        (SB3 clips no value by default), no value-loss clipping: with returns near 50 a value clip
        of 0.2 lets the critic follow only slowly, and a solved policy fell from 500 late in
        300k-step runs with it, never without it (bench/reports/learning.md); and a 200k-step budget,
        over which the learning rate and clip range anneal: with 100k, 2 of 12 seeds of the
        README's CartPole line were still climbing when both reached 0 and missed 475; with 200k
        all 12 reached it, by 75k at the latest (bench/reports/learning.md). mujoco: CleanRL's
        ppo_continuous_action (2,048-step batches, 10 epochs x 32 minibatches, observation and
        reward normalization), with the Gaussian policy's log std starting at -1 instead of 0:
        at 1M steps on HalfCheetah-v5 the greedy return went from 1,632 to 5,443 (2 seeds each;
        Hopper-v5 2,803 vs 2,599, within its seed spread; bench/reports/learning.md).
        robosuite: the defaults above (nothing measured here to choose better ones).
        """
        if family == "classic":
            return {
                "algo.norm_obs": False,
                "algo.lr": 1e-3,
                "algo.gamma": 0.98,
                "algo.gae_lambda": 0.8,
                "algo.update_epochs": 20,
                "algo.batch_size": 1024,
                "algo.anneal_clip": True,
                "algo.clip_vloss": False,
                "run.steps": 200_000,
            }
        if family == "mujoco":
            return {
                "algo.norm_obs": True,
                "algo.batch_size": 2048,
                "algo.update_epochs": 10,
                "algo.num_minibatches": 32,
                "env.normalize_reward": True,
                "algo.log_std_init": -1.0,
            }
        return {}

    @classmethod
    def preset_defaults(cls, preset: str, family: str) -> dict[str, Any]:
        """`run.preset=gpu` on MuJoCo tasks: the recipe for a GPU learner fed by many actors,
        batches of 32,768 env steps in minibatches of 4,096 (64 x fewer, larger steps than the
        family's 2,048 / 64, each a single launch-bound GPU step), 10 epochs, learning rate
        1e-3 annealed. Validated on the CPU with 64 actor processes (docs/gpu.md): HalfCheetah-v5
        greedy 5,000+. Other families and the cpu preset: nothing on top of the family's."""
        if preset == "gpu" and family == "mujoco":
            return {
                "algo.batch_size": 32_768,
                "algo.minibatch_size": 4_096,
                "algo.update_epochs": 10,
                "algo.lr": 1e-3,
            }
        return {}

    def check(self, env_info: EnvInfo | None = None) -> None:
        """Raise ValueError on settings PPO cannot use (`surreal launch` asks before anything
        starts; the learner again when it is built)."""
        require(self, "minibatch_size", "num_minibatches")
        if self.loss not in ("clip", "kl"):
            raise ValueError(f"algo.loss must be 'clip' or 'kl', got {self.loss!r}")
        if self.network == "conv_lstm":
            raise ValueError(
                "algo.network=conv_lstm is its own algorithm now: `surreal launch ppo-vision ...` "
                "(same settings, without algo.network)"
            )
        if self.network != "mlp":
            raise ValueError(f"algo.network must be 'mlp', got {self.network!r}")
        if self.model:
            load_class(self.model, "algo.model")  # raises LookupError saying what is wrong

    def compile_pays(self, run_config: Config, device: Any) -> bool:
        """`run.compile=auto`: the MLP (not an `algo.model` of your own) on the CPU in a run of
        `surreal.api.compiling.PAYS_AFTER_STEPS` minibatch steps or more (`run.steps` x
        `algo.update_epochs` / the minibatch size; an early stop on KL is not foreseen)."""
        steps = run_config.run.steps * self.update_epochs / minibatch_steps(run_config)
        return not self.model and pays(steps, device)

    def device_preference(self, run_config: Config) -> tuple[bool, str]:
        """`run.device=auto`: a GPU for a network of your own (`algo.model`) or for minibatches
        of `GPU_MIN_MINIBATCH` samples or more (the gpu preset's); the MLP at smaller ones on
        the CPU, where its step is faster (`surreal.api.device.GPU_MIN_MINIBATCH`)."""
        if self.model:
            return True, f"algo.model={self.model} (a network of your own)"
        mb = minibatch_steps(run_config)
        if mb >= GPU_MIN_MINIBATCH:
            return True, f"PPO's MLP at minibatch {mb:,} >= {GPU_MIN_MINIBATCH:,}"
        return False, (
            f"PPO's MLP at minibatch {mb:,} < {GPU_MIN_MINIBATCH:,} runs faster on a CPU core "
            "than on a GPU (docs/gpu.md)"
        )


@dataclass
class VisionPPOConfig(PPOConfig):
    """PPO on the paper's vision model (`surreal launch ppo-vision`): conv encoder on the camera
    image + proprio -> LSTM -> actor/critic heads, trained with truncated BPTT; needs a
    `<camera>_image` key first in env.obs_keys."""

    network: str = "conv_lstm"
    """'conv_lstm', the only model of ppo-vision."""
    batch_size: int = 0
    """Env steps per learner iteration (as in ppo); 0, ppo-vision's default: one segment per
    actor, the batch its robosuite recipes were run with."""

    @classmethod
    def family_defaults(cls, family: str) -> dict[str, Any]:
        """None: ppo-vision keeps its own defaults for every family."""
        return {}

    def check(self, env_info: EnvInfo | None = None) -> None:
        """Raise ValueError on settings ppo-vision cannot use (whether the observations hold a
        camera image of `algo.image_size`: `RecurrentPPOLearner.check_config`)."""
        if self.loss not in ("clip", "kl"):
            raise ValueError(f"algo.loss must be 'clip' or 'kl', got {self.loss!r}")
        if self.network != "conv_lstm":
            raise ValueError(
                f"ppo-vision runs the conv_lstm model only (algo.network={self.network!r}); "
                "for an MLP use `surreal launch ppo`"
            )

    def compile_pays(self, run_config: Config, device: Any) -> bool:
        """`run.compile=auto` leaves ppo-vision eager: its compiled step was not measured to pay
        (bench/learner_step.py, row "PPO conv+LSTM"); `run.compile=on` compiles it."""
        return False

    def device_preference(self, run_config: Config) -> tuple[bool, str]:
        """`run.device=auto`: the GPU when there is one (convolutions over camera images)."""
        return True, "ppo-vision's conv+LSTM network"


def minibatch_steps(run_config: Config) -> int:
    """Samples in one PPO minibatch: `algo.minibatch_size`, or the batch's env steps over
    `algo.num_minibatches` (at least 1)."""
    cfg = run_config.algo
    segments = OnPolicy.per_batch(run_config)  # the batch's one sizing function
    batch = segments * run_config.actor.rollout_length * run_config.env.num_envs
    return min(cfg.minibatch_size, batch) or max(batch // cfg.num_minibatches, 1)

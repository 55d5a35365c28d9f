"""The DDPG actor process: noisy mu(o) on a batch of envs -> n-step chunks pushed to replay."""

from __future__ import annotations

import time

import numpy as np
import torch

import caraml
from surreal.algos.ddpg.nstep import NStepWriter, Transition, pack_chunk
from surreal.envs import VectorEnv
from surreal.runtime.processes.common import Component
from surreal.runtime.wire.remote_policy import actor_inference


class ChunkWriter:
    """One NStepWriter per env; hands out chunks of `chunk_size` transitions."""

    def __init__(self, num_envs: int, n: int, gamma: float, chunk_size: int, dedup: bool) -> None:
        self.writers = [NStepWriter(n, gamma, stream=i) for i in range(num_envs)]
        self.chunk_size, self.dedup = chunk_size, dedup
        self.pending: list[Transition] = []

    def step(self, obs, unit_act, rew, next_obs, term, trunc, final_obs) -> list[dict]:
        """Record one vector step (next_obs already reset where an episode ended)."""
        for i, writer in enumerate(self.writers):
            boot = final_obs[i] if (term[i] or trunc[i]) and final_obs is not None else next_obs[i]
            self.pending.extend(
                writer.step(obs[i], unit_act[i], float(rew[i]), boot, bool(term[i]), bool(trunc[i]))
            )
        chunks = []
        while len(self.pending) >= self.chunk_size:
            part, self.pending = self.pending[: self.chunk_size], self.pending[self.chunk_size :]
            chunks.append(pack_chunk(part, self.dedup))
        return chunks


class Pacer:
    """Keeps the actors' env steps in the configured ratio to the learner's updates.

    While the learner is starved (a replay shard below its warm-up, refilling after a restart)
    the actors act on without new versions, which only their transitions can bring, but only
    for a refill's worth of steps each (`algo.replay_start / actors`), counted from where this
    actor saw the starvation begin: unbounded, fast actors (Pendulum: thousands of steps a
    second) spent the step budget in the second before the learner said it had batches again.
    Still starved after `RENEW_S` at that limit (the refilling shard was killed again, its
    transitions lost), an actor takes another refill's worth: the run never stands still.

    The warm-up allowance (`algo.replay_start / actors` steps ahead of the updates) is for a new
    run only: an actor whose first parameters come from a learner that counted env steps this
    actor's fellows did not take beside it (a resumed run, whose replay was restored; a
    restarted actor) keeps pace from its first step. Were the replay not restored, the learner
    says it is starved, which gives the refill's worth above. (It once let each actor of a
    resumed HalfCheetah run take 5k steps at 3x the learner's rate before the first wait; and
    the first fix of that took the allowance from a new run's actors too, whose learner has
    counted the warm-up's steps at its first publication: they stood for a minute while the
    learner took ~7k updates on the first 10k transitions.)
    """

    RENEW_S = 2.0
    """Seconds an actor waits at its refill allowance before it takes another one."""

    def __init__(self, algo, actors: int, clock=time.monotonic, resumed: bool = False) -> None:
        self.algo, self.actors, self.clock = algo, actors, clock
        self.v0: int | None = (
            None  # the parameter version when this actor started (resume, restart)
        )
        # 0 in a run with a checkpoint (`resumed`: no random steps before the learner's first
        # parameters), or once the first parameters say the run is under way
        self.warmup = 0 if resumed else algo.replay_start
        self.starved_from: int | None = None  # env steps when this starvation began
        self.waiting_since: float | None = None  # when the actor reached its refill allowance

    def limit(self, version: int) -> float:
        """Env steps this actor may have taken (since it started) while the learner is at `version`."""
        if self.algo.updates_per_step <= 0:
            return float("inf")
        updates = (version - (self.v0 or 0)) * self.algo.publish_every
        slack = self.algo.chunk_size + self.algo.n_step  # what sits in this actor's writer
        return (self.warmup + updates / self.algo.updates_per_step) / self.actors + slack

    def refill(self) -> float:
        """Env steps one actor may take for a starved learner: its share of the warm-up."""
        return self.algo.replay_start / self.actors + self.algo.chunk_size + self.algo.n_step

    def ahead(self, env_steps: int, version: int, starved: bool = False) -> bool:
        """Whether this actor is ahead of the learner; while the learner is `starved`, only
        once it took a refill's worth of steps since the starvation began (renewed after
        RENEW_S at that limit)."""
        limit = self.limit(version)
        if not starved:
            self.starved_from = self.waiting_since = None
            return env_steps >= limit
        if self.starved_from is None:
            self.starved_from = env_steps
        if env_steps < max(limit, self.starved_from + self.refill()):
            self.waiting_since = None
            return False
        now = self.clock()
        if self.waiting_since is None:
            self.waiting_since = now
        elif now - self.waiting_since >= self.RENEW_S:  # still starved: another refill's worth
            self.starved_from, self.waiting_since = env_steps, None
            return False
        return True

    def start(self, version: int, learner_step: int, env_steps: int) -> None:
        """Pace from the first parameters this actor got (at its own `env_steps`): the learner's
        version, and the env steps it had counted. What the other actors took beyond this
        one's share (`learner_step - actors * env_steps`) is warm-up already spent: a new run's
        actors, which took the run's first steps side by side, keep the whole allowance (their
        first parameters come at the sampling start, ~`replay_start` steps counted); a restarted
        actor, or one of a resumed run, gets none and keeps pace from its first step."""
        self.v0 = version
        spent = max(0, learner_step - self.actors * env_steps)
        self.warmup = max(0, min(self.warmup, self.algo.replay_start - spent))

    def fetch(self, params, env_steps: int, stopping) -> dict | None:
        """Newer parameters if any; waits (polling) while this actor is ahead of the learner."""
        while not stopping.is_set():
            try:
                fresh = params.fetch()
            except caraml.RequestTimeout:  # parameter servers restarting: keep what we have
                return None
            if fresh is not None and self.v0 is None:  # pace relative to the learner at our start
                self.start(params.version, params.step, env_steps)
            if fresh is not None or not self.ahead(
                env_steps, params.latest_version, params.starved
            ):
                return fresh
            stopping.wait(0.01)
        return None


def main(run_dir: str, index: int = 0) -> None:
    """Act until stopped: fetch parameters when they changed, push experience."""
    torch.set_num_threads(1)
    comp = Component(run_dir, "actor", index)
    cfg, algo = comp.config, comp.config.algo
    seed = cfg.run.seed + 1000 * (index + 1)
    rng = np.random.default_rng(seed)
    env = VectorEnv(cfg.env.id, cfg.env, seed=seed)
    policy, params = actor_inference(comp, index)  # actor.inference: local or remote
    explorer = policy.explorer(env.num_envs, index, cfg.run.actors, seed)
    writer = ChunkWriter(env.num_envs, algo.n_step, algo.gamma, algo.chunk_size, algo.dedup_obs)
    pusher = caraml.Pusher(comp.address("replay").tcp, hwm=64)
    pace = Pacer(algo, cfg.run.actors, resumed=comp.run.checkpoint.is_file())
    try:
        _act(comp, env, policy, params, writer, pusher, pace, explorer, rng)
    finally:
        env.close()
        params.close()
        pusher.close()
        comp.close()


def _act(comp, env, policy, params, writer, pusher, pace, explorer, rng) -> None:
    """The actor's loop until stopped: fetch parameters when due, step the envs with the
    policy's exploration (`surreal.api.offpolicy.Explorer`; uniformly random before the first
    parameters), push chunks, report every ~2 s."""
    budget = max(comp.config.run.steps, 1)
    obs, env_steps, last, steps_at_last, has_params = env.reset(), 0, time.monotonic(), 0, False
    while not comp.stopping.is_set():
        if env_steps % (16 * env.num_envs) == 0 or pace.ahead(
            env_steps, params.version, params.starved
        ):
            fresh = pace.fetch(params, env_steps, comp.stopping)
            if fresh is not None:
                policy.load_params(fresh)
                has_params = True
        if has_params:
            unit = explorer.act(policy.unit_action, obs, min(params.step / budget, 1.0))
        else:  # before the learner's first publication: uniform random exploration
            unit = explorer.random(env.num_envs, rng)
        next_obs, rew, term, trunc, info = env.step(policy.scale(unit))
        for chunk in writer.step(obs, unit, rew, next_obs, term, trunc, info["final_obs"]):
            pusher.push(chunk)
        explorer.reset(term | trunc)
        obs = next_obs
        env_steps += env.num_envs
        now = time.monotonic()
        if info["episode_returns"] or now - last > 2.0:
            comp.report(
                params.step,
                {
                    "actor/sps": (env_steps - steps_at_last) / max(now - last, 1e-6),
                    **explorer.metrics(),
                },
                env_steps=env_steps,
                episode_returns=info["episode_returns"],
                episode_lengths=info["episode_lengths"],
                version=params.version,
            )
            last, steps_at_last = now, env_steps

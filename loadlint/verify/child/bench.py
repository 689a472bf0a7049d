"""``bench`` mode: build the candidate configurations, check that each
yields the same data, then time fresh loaders per candidate in rotated
rounds (the measurement protocol of :mod:`loadlint.verify.measure`)."""

from __future__ import annotations

import gc
import math
import os
import time
from typing import Any

from loadlint.verify import measure
from loadlint.verify.child import identity
from loadlint.verify.child.cuda import GpuSampler, GpuStep
from loadlint.verify.child.loaders import index_batches, limited, make_loader, shutdown, workers_of
from loadlint.verify.child.probes import WindowMeter, attributable, pss, shm_used
from loadlint.verify.child.state import State

now = time.perf_counter
#: Fewest steady batches of a run once its time window is full (slow
#: batches: the protocol's batch minimum would make a run last many seconds);
#: with workers, at least two per worker.
MIN_WINDOW = 8


class Bench:
    """The target loader's captured arguments and how to time them."""

    def __init__(self, torch: Any, state: State, rec: dict[str, Any],
                 arguments: dict[str, Any], profile: Any) -> None:
        self.torch = torch
        self.state = state
        self.spec = state.spec
        self.rec = rec
        self.arguments = arguments
        self.profile = profile
        self.protocol = measure.Protocol(**self.spec.get("protocol", {}))
        self.iterable = rec["iterable"]
        self.auto = arguments.get("batch_size") is not None or arguments.get("batch_sampler") is not None
        self.cuda = bool(torch.cuda.is_available())
        self.step_s = (self.spec.get("step_ms") or 0) / 1000.0
        # With a GPU the simulated step runs on it and NVML watches it.
        self.gpu_step = GpuStep(torch, self.step_s) if self.cuda and self.step_s else None
        self.nvml = self.gpu_step is not None and self.spec.get("nvml", True)
        self.attributable = attributable(profile)
        self.usable = profile.usable_cpus
        self._plans: dict[int, list[Any] | None] = {}

    # -- candidates -----------------------------------------------------
    def candidates(self) -> list[dict[str, Any]]:
        """The configuration as written, the one ``loadlint fix`` would
        write, and every ``--try``; duplicates become aliases."""
        from loadlint.verify.adapters import suggested_config

        current = dict(self.rec["config"])
        out = [{"name": "current", "config": current, "origin": "the call as written"}]
        if self.spec.get("aa"):
            # An A/A test of the decision rule: the same configuration twice.
            return [*out, {"name": "again", "config": dict(current),
                           "origin": "--aa: the call as written, measured again"}]
        seen = [identity.canon(current)]

        def add(name: str, config: dict[str, Any], origin: str) -> None:
            config = identity.normalise(config)
            key = identity.canon(config)
            if key in seen:
                for c in out:
                    if identity.canon(c["config"]) == key and name not in c.get("aliases", []):
                        c.setdefault("aliases", []).append(name)
                return
            seen.append(key)
            out.append({"name": name, "config": config, "origin": origin})

        ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        batch_size = self.arguments.get("batch_size")
        suggested, origin = suggested_config(
            self.rec["file"], self.rec["line"], self.profile, current, cuda=self.cuda,
            ranks_per_node=ranks, batch_size=batch_size if isinstance(batch_size, int) else None,
            project=os.path.dirname(os.path.abspath(self.spec["script"])) if self.spec.get("script") else None)
        add("suggested", suggested, origin)
        for i, extra in enumerate(self.spec.get("tries") or []):
            config = dict(current)
            config.update(extra)
            add(f"try{i + 1}" if len(self.spec["tries"]) > 1 else "try", config, "--try")
        return out

    # -- equivalence ----------------------------------------------------
    def index_stream(self, config: dict[str, Any], limit: int) -> tuple[list[Any], int]:
        return index_batches(self.torch, self.arguments, config, limit)

    def iterable_digests(self, config: dict[str, Any], budget_s: float) -> dict[str, Any]:
        loader = make_loader(self.torch, self.arguments, config)
        digests: list[str] = []
        complete = True
        t0 = now()
        it = iter(loader)
        try:
            for batch in it:
                digests.extend(identity.sample_digests(batch, self.auto))
                if now() - t0 > budget_s:
                    complete = False
                    break
        finally:
            shutdown(loader, it)
        return {"digests": digests, "complete": complete}

    def equivalence(self, cands: list[dict[str, Any]]) -> None:
        """Mark each candidate equivalent to the first (or not), or failed."""
        self.state.progress("equivalence")
        if self.iterable:
            budget = float(self.spec.get("equivalence_budget_s", 60.0))
            ref = self.iterable_digests(cands[0]["config"], budget)
            for c in cands[1:]:
                try:
                    got = self.iterable_digests(c["config"], budget)
                except Exception as exc:
                    c["error"] = failure(exc)
                    continue
                c["equivalence"] = identity.compare_iterable(ref, got)
                self.state.progress("equivalence", candidate=c["name"])
            cands[0]["equivalence"] = {"equivalent": True, "how": "reference",
                                       "samples": len(ref["digests"])}
            return
        limit = int(self.spec.get("equivalence_batches", 100000))
        ref_stream, total = self.index_stream(cands[0]["config"], limit)
        cands[0]["equivalence"] = {"equivalent": True, "how": "reference", "batches": total}
        for c in cands[1:]:
            try:
                got, n = self.index_stream(c["config"], limit)
            except Exception as exc:
                c["error"] = failure(exc)
                continue
            c["equivalence"] = identity.compare_streams(ref_stream, total, got, n)

    # -- one timed run --------------------------------------------------
    def plan(self, n_batches: int) -> list[Any] | None:
        """The first ``n_batches`` index batches every candidate loads."""
        if self.iterable:
            return None
        return self.index_stream(self.rec["config"], n_batches)[0]

    def run(self, config: dict[str, Any], plan: list[Any] | None, limit_samples: int | None,
            seconds: float | None = None) -> dict[str, Any]:
        """Time one fresh loader with ``config`` for at least two epochs of
        ``plan`` and the protocol's minimum steady batches and ``seconds``
        (default: the protocol's minimum)."""
        nw = int(config.get("num_workers") or 0)
        pf = config.get("prefetch_factor")
        dataset = None
        if self.iterable and limit_samples:
            dataset = limited(self.arguments["dataset"], limit_samples)
        loader = make_loader(self.torch, self.arguments, config, plan=plan,
                             auto_collation=self.auto, dataset=dataset)
        warm = self.protocol.warmup(nw, pf)
        need = self.protocol.measured(nw)
        meter = WindowMeter(self.usable, nw + 1, self.attributable)
        shm0 = shm_used()
        pss_max = 0
        shm_max = 0
        epochs: list[dict[str, Any]] = []
        steady_b = 0
        steady_s = 0.0
        wait_s = 0.0
        total_b = 0
        h2d = {"bytes": 0, "seconds": 0.0}
        last_sample = 0.0
        pending_stop = 0.0
        gpu = GpuSampler() if self.nvml else None
        meter.start()
        if gpu:
            gpu.start()
        t_run = now()
        seconds_min = self.protocol.seconds_min if seconds is None else seconds
        deadline = t_run + max(60.0, 30 * seconds_min)
        while True:
            t_iter = now()
            it = iter(loader)
            nb = 0
            start_s = None
            while True:
                t0 = now()
                try:
                    batch = next(it)
                except StopIteration:
                    stop_s = now() - t0
                    break
                t1 = now()
                if self.cuda:
                    self._h2d(batch, h2d)
                if self.gpu_step is not None:
                    self.gpu_step()
                elif self.step_s:
                    time.sleep(self.step_s)
                t2 = now()
                nb += 1
                total_b += 1
                if nb == 1:
                    start_s = t1 - t_iter + pending_stop
                elif total_b > warm:
                    steady_b += 1
                    steady_s += t2 - t0
                    wait_s += t1 - t0
                if not nw and steady_s >= seconds_min and steady_b >= MIN_WINDOW:
                    # Without workers there is no restart to see: a slow
                    # call as written stops once its window is full (the
                    # run is bounded by time and batches, not by epochs).
                    del batch
                    stop_s = 0.0
                    break
                if t2 - last_sample > 0.5:
                    last_sample = t2
                    pids = workers_of(it)
                    meter.sample_workers(pids)
                    pss_max = max(pss_max, sum(pss(p) for p in pids))
                    used = shm_used()
                    if used is not None and shm0 is not None:
                        shm_max = max(shm_max, used - shm0)
                del batch
            pending_stop = stop_s
            epochs.append({"batches": nb, "start_s": start_s, "stop_s": stop_s,
                           "seconds": now() - t_iter})
            self.state.beat(epochs=len(epochs))
            if nb == 0:
                break
            # Two epochs measure persistent workers' cheaper restart; other
            # loaders start every epoch as they started the first, so one
            # is enough once the window is full (a run is bounded by time
            # and batches, not by epochs).
            restart = nw and bool(config.get("persistent_workers"))
            if len(epochs) >= (2 if restart else 1) and steady_s >= seconds_min and (
                    steady_b >= need or steady_b >= max(MIN_WINDOW, 2 * nw)):
                break
            if now() > deadline and len(epochs) >= 2:
                break
        meter.sample_workers(workers_of(getattr(loader, "_iterator", None)))
        shutdown(loader, it)
        del it, loader
        gc.collect()
        window = meter.stop()
        samples = gpu.stop() if gpu else None
        return {
            "epochs": epochs,
            "ttfb_s": epochs[0]["start_s"] if epochs else None,
            "steady_batches": steady_b,
            "steady_s": steady_s,
            "data_wait_s": wait_s,
            "warmup_batches": warm,
            "total_batches": total_b,
            "wall_s": now() - t_run,
            "cpu_s": window["our_cpu_s"],
            "cpu_per_batch": window["our_cpu_s"] / total_b if total_b else None,
            "utilisation": window["our_cpu_s"] / window["wall_s"] if window["wall_s"] > 0 else None,
            "worker_pss": pss_max,
            "shm_growth": shm_max,
            "window": window,
            "h2d": h2d if self.cuda else None,
            "gpu": samples,
        }

    def _h2d(self, batch: Any, acc: dict[str, Any]) -> None:
        torch = self.torch
        t0 = now()
        n = 0
        for leaf in identity.flat(batch):
            if torch.is_tensor(leaf):
                leaf.to("cuda", non_blocking=True)
                n += leaf.numel() * leaf.element_size()
        torch.cuda.current_stream().synchronize()
        acc["bytes"] += n
        acc["seconds"] += now() - t0

    # -- the protocol ---------------------------------------------------
    def epoch_for(self, config: dict[str, Any], base: int) -> tuple[list[Any] | None, int | None]:
        """The plan (map-style) or sample limit (iterable) of ``config``'s
        runs: ``base`` batches per epoch, and never fewer than a whole
        warm-up and measured window of that configuration, so that batches
        prefetched at an epoch's start cannot pass for a steady rate. Every
        plan is a prefix of the same index stream."""
        nw = int(config.get("num_workers") or 0)
        n = max(base, self.protocol.warmup(nw, config.get("prefetch_factor"))
                + self.protocol.measured(nw))
        real_len = self.rec.get("len")
        if real_len:
            n = min(n, real_len)
        if self.iterable:
            return None, self.iterable_limit(n)
        if n not in self._plans:
            self._plans[n] = self.plan(n)
        return self._plans[n], None

    def prepare(self, current: dict[str, Any], calib: dict[str, Any] | None = None,
                seconds: float | None = None) -> tuple[int, dict[str, Any]]:
        """Batches per epoch for the runs, so that an epoch of the current
        configuration lasts about half a run (the protocol's minimum, or
        ``seconds``), and the calibration run it was sized from."""
        base = 0
        if calib is None:
            # One discarded run of the current configuration, which also
            # warms the page cache so that the first timed run is not the
            # only one reading from disk.
            self.state.progress("calibrate")
            calib = self.run(current["config"], *self.epoch_for(current["config"], base))
        per_batch = calib["steady_s"] / max(1, calib["steady_batches"])
        if per_batch > 0:
            base = math.ceil((seconds or self.protocol.seconds_min) / 2 / per_batch)
        return base, calib

    def benchmark(self, cands: list[dict[str, Any]], deadline: float,
                  calib: dict[str, Any] | None = None,
                  seconds: float | None = None) -> dict[str, Any]:
        """Interleaved rounds over the equivalent candidates (each round runs
        every active candidate once, the order rotating), at least the
        protocol's repeats, then more while a comparison is undecided, the
        rounds allow and ``deadline`` (``time.perf_counter``) is ahead.
        ``seconds``: the minimum of each run (default: the protocol's)."""
        usable = [c for c in cands if not c.get("error") and not c.get("dropped")
                  and c.get("equivalence", {}).get("equivalent", False)]
        base, calib = self.prepare(usable[0], calib, seconds)
        max_rounds = max(self.protocol.max_rounds, self.protocol.repeats)
        done = 0
        active = list(usable)
        while True:
            started = now()
            for c in rotate(active, done):
                self.state.progress("verdict", candidate=c["name"], round=done + 1)
                self.measure_run(c, base, done, seconds)
            done += 1
            # The minimal proof was planned for (the search left room for
            # it); past it, a round that would end after the budget is not started.
            if done < measure.MIN_PAIRS:
                continue
            if now() + (now() - started) > deadline:
                break
            if done < self.protocol.repeats:
                continue
            pending = [c for c in usable[1:] if not c.get("error")
                       and decide(usable[0], c).verdict in ("inconclusive", "contended")]
            if not pending or done >= max_rounds:
                break
            active = [usable[0], *pending]
        return {"plan_batches": base, "calibration": calib, "rounds": done,
                "real_len": self.rec.get("len")}

    def iterable_limit(self, batches: int) -> int:
        """Samples in ``batches`` batches of the captured batch size."""
        bs = self.arguments.get("batch_size") or 1
        return int(batches * bs)

    def measure_run(self, c: dict[str, Any], base: int, round_: int,
                    seconds: float | None = None) -> dict[str, Any] | None:
        """One run of candidate ``c``, kept whatever the machine did (the
        paired decision copes with load; the gate's figures say how busy it
        was). None when the configuration failed."""
        c.setdefault("runs", [])
        try:
            r = self.run(c["config"], *self.epoch_for(c["config"], base), seconds)
        except Exception as exc:
            c["error"] = failure(exc)
            return None
        r["gate"] = gate_record(r["window"])
        r["rate"] = run_rate(r, self.rec.get("len"), self.rec.get("iterable"))
        r["round"] = round_
        c["runs"].append(r)
        self.state.runs += 1
        return r


def gate_record(window: dict[str, Any]) -> dict[str, Any]:
    """The contention gate's verdict on one run's window, for the report."""
    g = measure.gate(measure.Window.from_dict(window))
    return {"contended": g.contended, "foreign_share": g.foreign_share,
            "wait_share": g.wait_share, "reason": g.reason}


def run_rate(run: dict[str, Any], real_len: int | None, iterable: bool | None) -> float:
    """The rate a verdict uses: user epochs per second projected from this
    run (start-up + len / steady rate), or batches per second when the
    real epoch length is unknown."""
    steady = run["steady_batches"] / run["steady_s"] if run["steady_s"] > 0 else 0.0
    if not real_len:
        return steady
    later = [e["start_s"] for e in run["epochs"][1:] if e["start_s"] is not None]
    startup = measure.median(later) if later else (run["ttfb_s"] or 0.0)
    epoch = measure.project_epoch(startup, steady, real_len)
    return 1.0 / epoch if epoch and math.isfinite(epoch) else 0.0


def decide(current: dict[str, Any], cand: dict[str, Any]) -> measure.Decision:
    """The paired decision rule on two candidates' runs."""
    return measure.decide(measure.runs_of(current.get("runs", [])),
                          measure.runs_of(cand.get("runs", [])),
                          busy_share=measure.busy_share_limit())


def rotate(items: list[Any], r: int) -> list[Any]:
    """``items`` started at position ``r`` (round-robin order of a round)."""
    if not items:
        return []
    r %= len(items)
    return items[r:] + items[:r]


def failure(exc: BaseException) -> dict[str, Any]:
    """An exception as the report's one-line error."""
    text = str(exc).strip().splitlines()
    return {"type": type(exc).__name__, "message": text[0][:300] if text else ""}

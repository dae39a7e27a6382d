"""`kit fidelity apex`: Apex's own word_language_model example beside the kit's LSTM cells,
same corpus, same GPU.

    kit fidelity apex --apex-src apex-241dd6c4.tar.gz \
        --fp16-utils /path/to/apex-25.01 [--presets apex-2018,tensor-core] [--out DIR]

(``python scripts/fidelity_lstm.py`` takes the same options.)

What runs, per preset (the kit's `apex-2018` = the example's defaults; `tensor-core` = 1504 units,
batch 24, dropout 0.65, static loss scale 128):

    the original main.py (from --apex-src, never copied into the kit), one epoch each:
        fp32 with TF32 off everywhere         <-> kit fp32 (strict)
        fp32 with TF32 on everywhere          <-> kit tf32
        fp32 with today's defaults            (cuDNN TF32 on, matmul TF32 off: no kit cell has that)
        --fp16 [--static-loss-scale S]        <-> kit fp16-master
    the kit: `kit run --suite lstm -p fp32,tf32,fp16-master --data synthetic` (--repeats, default 1)

in rounds: each round runs the original once per setting and the kit once, the two in alternating order
(the original first in odd rounds, the kit first in even ones), so that a drift of the machine reaches
both alike; the 200-unit model is paced by the host, and on one H200 the original's runs of one setting,
one after another, differed by up to 16% (the third H200 run in docs/measurements.md). At least --runs rounds
(default 3); then more, until every kit ÷ original ratio's 95% CI over the rounds (Fieller's interval of
the ratio of means, kit.compare.stats.ratio_estimate, as `kit compare` computes it) is within ±--ci
(default 3%), or --max-runs rounds (default 8) have run; the output says which. Each row is also tested
for being host-bound: the graphed engine's cell of the same precision (its whole step one CUDA graph,
the GPU busy 99% of the time) runs once per preset; a kit cell below 90% of its tokens/s keeps its GPU
busy less than 90% of its step, so its ratio compares two Python loops on this CPU (named as such).

The corpus is the kit's synthetic WikiText-2 (seed 0) written in the example's file format (one line
per line, the example appends <eos>), so both read the same token sequence. Where WikiText-2's real
train split is available, pass --corpus DIR with train.txt/valid.txt/test.txt instead (and the kit then
runs with --data real).

The example needs two edits for today's PyTorch, applied to a temporary copy at run time:
`p.data.add_(-lr, grad)` -> `p.data.add_(grad, alpha=-lr)` (the old signature is gone) and
`torch.load(f)` -> `torch.load(f, weights_only=False)` (its own checkpoint of a whole model); one more
line sets the TF32 switches for the run, and one ends each training epoch after --max-batches batches
(the kit's own cap), so that --runs runs of each setting fit in a few minutes. Its `apex.fp16_utils` comes from --fp16-utils (Apex 25.01
still has it and imports with torch 2.x; the 241dd6c4 package does not).

The original's speed in one run: the median of its printed `ms/batch` windows (100 batches each) after the
first, as tokens/s = batch x bptt / (ms/batch); the kit's: the cell's median steady-state tokens/s. Each
side's figure is the median over rounds, and kit ÷ original the ratio of the two (each round's own ratio
is listed beside it).
Prints a Markdown table and writes fidelity.json, every log, and each kit run's results.json and bundle to
--out; its temporary folder (the example's copy, the corpus, the kit's run folders) is removed at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from kit.compare.stats import UNBOUNDED, Sample, ratio_estimate
from kit.errors import RunFailed, UsageError

#: the kit's checkout or installed package root: `python -m kit run` runs from here
ROOT = Path(__file__).resolve().parents[2]

#: The example's command-line settings per kit preset (kit/facts/models.py holds the same values).
PRESET_ARGS = {
    "apex-2018": {"args": [], "batch": 20, "bptt": 35, "fp16_scale": None},
    "tensor-core": {"args": ["--emsize", "1504", "--nhid", "1504", "--batch_size", "24", "--dropout", "0.65"],
                    "batch": 24, "bptt": 35, "fp16_scale": 128},
}
PATCHES = [
    ("p.data.add_(-lr/args.static_loss_scale, p.grad.data)", "p.data.add_(p.grad.data, alpha=-lr/args.static_loss_scale)"),
    ("model = torch.load(f)", "model = torch.load(f, weights_only=False)"),
    # stop the epoch after KIT_MAX_BATCHES batches (the kit's --max-batches), so several runs fit
    ("        data, targets = get_batch(train_data, i)\n",
     "        if batch >= int(os.environ.get('KIT_MAX_BATCHES', '1000000000')):\n            break\n"
     "        data, targets = get_batch(train_data, i)\n"),
    ("import argparse\n", "import argparse\nimport os\n"),
    # with KIT_PRINT_LOSSES set, print every training batch's (unscaled) loss in full: the CPU test
    # tests/test_lstm_fidelity.py compares them with the kit's, batch for batch
    ("        total_loss += loss.data\n",
     "        total_loss += loss.data\n"
     "        if os.environ.get('KIT_PRINT_LOSSES'):\n            print('KIT_LOSS', repr(float(loss)), flush=True)\n"),
    # and evaluate at most as many chunks as the kit does (its --max-batches caps evaluation too)
    ("        for i in range(0, data_source.size(0) - 1, args.bptt):\n",
     "        for n_eval, i in enumerate(range(0, data_source.size(0) - 1, args.bptt)):\n"
     "            if n_eval >= int(os.environ.get('KIT_MAX_BATCHES', '1000000000')):\n                break\n"),
]
#: the original's settings: label -> (TF32 switches: True/False/None = torch defaults, --fp16, log tag, kit cell)
SETTINGS = {
    "strict": ("fp32 (TF32 off)", False, False, "fp32"),
    "tf32": ("fp32 (TF32 on)", True, False, "tf32"),
    "default": ("fp32 (torch defaults)", None, False, None),
    "fp16": ("--fp16", None, True, "fp16-master"),
}
MS_PER_BATCH = re.compile(r"ms/batch\s+([0-9.]+)")
#: the original's source, as a remedy names it
APEX_TGZ = "a `git archive` tarball of github.com/NVIDIA/apex at commit 241dd6c4 (git archive -o apex-241dd6c4.tar.gz 241dd6c4)"


def _fail(message: str) -> None:
    raise UsageError(message, remedy="Give --apex-src an Apex source with examples/word_language_model "
                     f"(commit 241dd6c4: a folder, or {APEX_TGZ}).")


def extract_example(src: Path, dest: Path) -> Path:
    """examples/word_language_model from an Apex folder or `git archive` tarball."""
    dest.mkdir(parents=True, exist_ok=True)
    want = ("main.py", "data.py", "model.py")
    if src.is_dir():
        found = next(src.rglob("examples/word_language_model/main.py"), None)
        if found is None:
            _fail(f"{src} has no examples/word_language_model/main.py (an Apex before Mar 2019, e.g. 241dd6c4)")
        for name in want:
            shutil.copy(found.parent / name, dest / name)
        return dest
    with tarfile.open(src) as tar:
        for m in tar.getmembers():
            parts = m.name.split("/")
            if m.isfile() and len(parts) >= 3 and parts[-3:-1] == ["examples", "word_language_model"] and parts[-1] in want:
                (dest / parts[-1]).write_bytes(tar.extractfile(m).read())
    missing = [n for n in want if not (dest / n).is_file()]
    if missing:
        _fail(f"{src} has no examples/word_language_model/{', '.join(missing)} (an Apex before Mar 2019, e.g. 241dd6c4)")
    return dest


def patched_main(example: Path, tf32: bool | None) -> Path:
    text = (example / "main.py").read_text()
    for old, new in PATCHES:
        if old not in text:
            _fail(f"main.py does not contain {old!r}: another version of the example? (this script patches 241dd6c4's)")
        text = text.replace(old, new)
    if tf32 is not None:
        hook = "args = parser.parse_args()\n"
        text = text.replace(hook, hook + f"torch.backends.cudnn.allow_tf32 = {tf32}; torch.backends.cuda.matmul.allow_tf32 = {tf32}\n", 1)
    name = {None: "main_default.py", True: "main_tf32.py", False: "main_strict.py"}[tf32]
    (example / name).write_text(text)
    return example / name


def write_synthetic_corpus(folder: Path, seed: int = 0) -> dict:
    """The kit's synthetic WikiText-2 in the example's format: a line per <eos>-terminated run."""
    from kit.data.synthetic import wikitext2_like

    corpus = wikitext2_like(seed=seed)
    words = corpus.dictionary.idx2word
    folder.mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train.txt"), ("valid", "valid.txt"), ("test", "test.txt")):
        ids = getattr(corpus, split)
        lines, line = [], []
        for i in ids.tolist():
            if words[i] == "<eos>":
                lines.append(" ".join(line))
                line = []
            else:
                line.append(words[i])
        (folder / name).write_text("\n".join(lines) + "\n")
    return corpus.info


def _run_original_once(script: Path, corpus: Path, preset: str, fp16: bool, log: Path, max_batches: int) -> dict:
    p = PRESET_ARGS[preset]
    cmd = [sys.executable, script.name, "--cuda", "--epochs", "1", "--log-interval", "100", "--data", str(corpus),
           "--save", str(script.parent / "model.pt"), *p["args"]]
    if fp16:
        cmd.append("--fp16")
        if p["fp16_scale"]:
            cmd += ["--static-loss-scale", str(p["fp16_scale"])]
    env = dict(os.environ, KIT_MAX_BATCHES=str(max_batches))
    out = subprocess.run(cmd, cwd=script.parent, capture_output=True, text=True, env=env)
    log.write_text(" ".join(cmd) + "\n\n" + out.stdout + "\n" + out.stderr)
    if out.returncode != 0:
        raise RunFailed(f"the original example failed ({out.returncode}); see {log}")
    windows = [float(x) for x in MS_PER_BATCH.findall(out.stdout)]
    steady = windows[1:] or windows
    if not steady:
        raise RunFailed(f"the original printed no ms/batch lines; see {log}")
    ms = statistics.median(steady)
    return {"ms_per_batch_windows": windows, "tokens_per_s": p["batch"] * p["bptt"] * 1000.0 / ms, "command": cmd}


def run_kit(preset: str, precisions: list, results: Path, repeats: int, max_batches: int, data: str, log: Path,
            engine: str = "kit") -> tuple:
    """The kit's cells of ``preset`` by precision (of ``engine``: the faithful ``kit``, or ``graphed``), and
    (device name, torch version) from its environment record."""
    cmd = [sys.executable, "-m", "kit", "run", "--suite", "lstm", "--engines", engine, "--preset", preset,
           "--precisions", ",".join(precisions),
           "--data", data, "--device", "cuda", "--repeats", str(repeats), "--max-batches", str(max_batches),
           "--skip-checks", "--results-dir", str(results)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log.write_text(" ".join(cmd) + "\n\n" + out.stdout + "\n" + out.stderr)
    found = sorted(results.glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise RunFailed(f"kit run wrote no results.json ({out.returncode}); see {log}")
    shutil.copy(found[-1], log.with_suffix(".results.json"))
    bundles = sorted(results.glob("*.tar.gz"), key=lambda p: p.stat().st_mtime)
    if bundles:  # the run's bundle, kept beside its log (the work folder is removed at the end)
        shutil.copy(bundles[-1], log.with_suffix(".tar.gz"))
    doc = json.loads(found[-1].read_text())
    env = doc.get("environment") or {}
    gpus = ((env.get("nvml") or {}).get("gpus") or [{}])
    facts = {"device": gpus[0].get("name") or env.get("run_device"), "torch": (env.get("packages") or {}).get("torch")}
    return {c["precision"]: c for c in doc["cells"] if c.get("model") == preset and c.get("engine", "kit") == engine}, facts


def kit_rate(cell: dict | None) -> float | None:
    if not cell or cell.get("status") != "ok":
        return None
    s = (cell.get("summary") or {}).get("throughput_items_per_s") or {}
    return s.get("median")


def check_inputs(apex_src: Path | None, fp16_utils: Path | None, presets: list, settings: list) -> None:
    """Every option checked before anything runs (one line each, exit 2)."""
    if apex_src is None:
        raise UsageError("kit fidelity apex needs --apex-src: the Apex source whose examples/word_language_model is the original",
                         remedy=f"Give --apex-src a folder of NVIDIA Apex's source, or {APEX_TGZ}.")
    if not (apex_src.is_dir() or (apex_src.is_file() and tarfile.is_tarfile(str(apex_src)))):
        raise UsageError(f"--apex-src {apex_src}: not an Apex source folder or tar archive",
                         remedy=f"Give a folder of NVIDIA Apex's source, or {APEX_TGZ}.")
    if fp16_utils is None or not (fp16_utils / "apex" / "fp16_utils").is_dir():
        raise UsageError(f"--fp16-utils {fp16_utils}: no apex/fp16_utils in it" if fp16_utils else "kit fidelity apex needs --fp16-utils",
                         remedy="Give an extracted Apex 25.01 folder (its apex.fp16_utils imports with today's torch; "
                         "241dd6c4's does not): tar -xzf apex-25.01.tar.gz, a `git archive` of tag 25.01 of "
                         "github.com/NVIDIA/apex")
    unknown = [p for p in presets if p not in PRESET_ARGS]
    if unknown or not presets:
        raise UsageError(f"--presets {','.join(presets)}: choose from {', '.join(PRESET_ARGS)}")
    bad = [k for k in settings if k not in SETTINGS]
    if bad or not settings:
        raise UsageError(f"--settings {','.join(settings)}: choose from {', '.join(SETTINGS)}")


#: the stopping rule's target: every ratio's 95% CI within ±3% of its ratio of means
CI_HALF_WIDTH = 0.03
#: rounds at most (each round: the original once per setting, the kit's cells once)
MAX_ROUNDS = 8
#: a kit cell whose GPU is busy less than this share of its step is paced by the host
HOST_BOUND_BUSY = 0.90
STOP_CI = "ci"
STOP_LIMIT = "round limit"


def ratio_with_ci(kit_rates: list, original_rates: list) -> dict:
    """kit ÷ original over the rounds: the ratio of medians with the 95% CI of the ratio of means
    (kit.compare.stats.ratio_estimate, as `kit compare` computes it) and the CI's half-width relative
    to the ratio of means (None with fewer than two rounds a side, or an unbounded CI)."""
    num, den = Sample.of(kit_rates), Sample.of(original_rates)
    est = ratio_estimate(num, den) if num is not None and den is not None else None
    if est is None:
        return {"ratio": None, "ci_low": None, "ci_high": None, "ci_half_width_rel": None, "rounds": 0}
    half = None
    if est.ci_low is not None and est.ci_high is not None and est.mean_ratio:
        half = (est.ci_high - est.ci_low) / 2.0 / est.mean_ratio
    return {"ratio": est.ratio, "ci_low": est.ci_low, "ci_high": est.ci_high, "ci_half_width_rel": half,
            "rounds": min(num.n, den.n), "verdict": est.verdict}


def ci_stop(pairs: list, target: float = CI_HALF_WIDTH):
    """The stopping rule for measure_rounds: stop once every (original label, kit mode) pair's CI is
    bounded and within ±``target`` (a pair whose side measured nothing does not hold the rounds up)."""

    def stop(original: dict, kit: dict) -> bool:
        for label, mode in pairs:
            o = [x.get("tokens_per_s") for x in original.get(label, [])]
            k = kit.get(mode, [])
            if not any(o) or not any(k):
                continue
            half = ratio_with_ci(k, o)["ci_half_width_rel"]
            if half is None or half > target:
                return False
        return True

    return stop


def measure_rounds(runs: int, labels: list, original_once, kit_once, say=lambda text: None,
                   max_runs: int | None = None, stop=None) -> dict:
    """At least ``runs`` rounds, each running the original once per setting (``original_once(label, round)``)
    and the kit's cells once (``kit_once(round)`` -> {kit mode: tokens/s}), the two in alternating order
    (the original first in rounds 1, 3, ..., the kit first in rounds 2, 4, ...), so that a drift of the
    machine during the measurement (another tenant, clocks, a host-bound run's luck with its CPU) reaches
    both alike instead of whichever ran last. With ``stop`` (e.g. :func:`ci_stop`), rounds go on after
    ``runs`` until ``stop(original, kit)`` holds or ``max_runs`` rounds have run.

    Returns {"original": {label: [per-round result]}, "kit": {mode: [per-round tokens/s]}, "order": [...],
    "rounds": n, "stopped": "ci" | "round limit" | None (no rule)}."""
    original: dict = {label: [] for label in labels}
    kit: dict = {}
    order: list = []
    limit = max(runs, max_runs or runs) if stop is not None else runs
    stopped = None
    r = 0
    while r < limit:
        parts = ("original", "kit") if r % 2 == 0 else ("kit", "original")
        for part in parts:
            if part == "original":
                for label in labels:
                    say(f"round {r + 1}/{limit}: the original example, {label}")
                    original[label].append(original_once(label, r))
                    order.append(("original", label, r))
            else:
                say(f"round {r + 1}/{limit}: the kit's cells")
                for mode, rate in kit_once(r).items():
                    kit.setdefault(mode, []).append(rate)
                order.append(("kit", None, r))
        r += 1
        if stop is not None and r >= runs:
            if stop(original, kit):
                stopped = STOP_CI
                break
            if r >= limit:
                stopped = STOP_LIMIT
    return {"original": original, "kit": kit, "order": order, "rounds": r, "stopped": stopped}


def median_or_none(values: list) -> float | None:
    known = [v for v in values if v]
    return statistics.median(known) if known else None


def host_bound(kit_rate: float | None, gpu_bound_rate: float | None, threshold: float = HOST_BOUND_BUSY) -> dict:
    """How busy the kit cell keeps its GPU, estimated as its tokens/s over the graphed engine's at the same
    precision (whose captured step keeps the GPU busy 99% of the time on an H200: its rate is the GPU's
    rate for this model), and whether that is below ``threshold``: then the step is paced by the host
    (Python launching kernels), and kit ÷ original compares two host loops on this machine's CPU."""
    if not kit_rate or not gpu_bound_rate:
        return {"gpu_busy_estimate": None, "host_bound": None}
    busy = min(kit_rate / gpu_bound_rate, 1.0)
    return {"gpu_busy_estimate": busy, "host_bound": busy < threshold}


def run_apex_fidelity(apex_src: Path | None, fp16_utils: Path | None, *, presets: list, settings: list, corpus: Path | None = None,
                      repeats: int = 1, max_batches: int = 1000, runs: int = 3, out: Path = Path("fidelity-lstm"),
                      progress=None, max_runs: int = MAX_ROUNDS, ci: float = CI_HALF_WIDTH) -> dict:
    """Run the original and the kit in interleaved rounds (measure_rounds): at least ``runs``, then more until
    every ratio's 95% CI is within ±``ci`` or ``max_runs`` rounds have run; pair each setting with its kit
    cell; write ``out``/fidelity.json after each preset."""
    check_inputs(apex_src, fp16_utils, presets, settings)
    if max_runs < runs:
        raise UsageError(f"--max-runs {max_runs} is below --runs {runs}: the rounds at most cannot be fewer than at least")
    if not 0 < ci < 1:
        raise UsageError(f"--ci {ci}: the CI's half-width target is a fraction, e.g. 0.03 for ±3%")
    say = progress or (lambda text: print(text, file=sys.stderr, flush=True))
    work = Path(tempfile.mkdtemp(prefix="kit-fidelity-"))  # the example's copy, the corpus, the kit's run folders
    try:
        return _run_in(work, apex_src, fp16_utils, presets, settings, corpus, repeats, max_batches, runs, out, say,
                       max_runs, ci)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # what is kept is in ``out`` (logs, results, bundles)


def _run_in(work: Path, apex_src: Path, fp16_utils: Path, presets: list, settings: list, corpus: Path | None,
            repeats: int, max_batches: int, runs: int, out: Path, say, max_runs: int = MAX_ROUNDS,
            ci: float = CI_HALF_WIDTH) -> dict:
    example = extract_example(apex_src.resolve(), work / "example")
    out.mkdir(parents=True, exist_ok=True)
    scripts = {tf32: patched_main(example, tf32) for tf32 in (False, True, None)}
    os.environ["PYTHONPATH"] = os.pathsep.join([str(fp16_utils.resolve()), os.environ.get("PYTHONPATH", "")])
    if corpus:
        corpus_dir, data, corpus_info = corpus.resolve(), "real", {"source": "given", "folder": str(corpus)}
    else:
        corpus_dir, data = work / "corpus", "synthetic"
        corpus_info = write_synthetic_corpus(corpus_dir)
    report: dict = {"corpus": corpus_info, "rows": [], "apex_src": str(apex_src), "fp16_utils": str(fp16_utils),
                    "method": (f"at least {runs} round(s) per preset, then more until every ratio's 95% CI is within "
                               f"±{ci:.0%} or {max_runs} rounds have run; each round runs the original once per setting and "
                               f"the kit's cells once ({repeats} repeat(s)), the original first in odd rounds and the kit "
                               "first in even ones; each side's figure is the median over rounds; kit ÷ original = the "
                               "ratio of the two medians, its CI that of the ratio of means over the rounds (Fieller, "
                               "kit.compare.stats.ratio_estimate, as kit compare); host-bound: the kit cell's tokens/s "
                               f"below {HOST_BOUND_BUSY:.0%} of the graphed engine's at the same precision (measured once "
                               "per preset)"),
                    "ci_half_width_target": ci, "min_rounds": runs, "max_rounds": max_runs}
    for preset in presets:
        chosen = {SETTINGS[k][0]: SETTINGS[k] for k in settings}
        modes = [c for *_, c in chosen.values() if c]
        env: dict = {}

        def original_once(label: str, r: int, preset: str = preset) -> dict:
            _label, tf32, fp16, _ = chosen[label]
            log = out / f"original-{preset}-{label.split()[0].strip('-')}-{tf32}.run{r}.log"
            return _run_original_once(scripts[tf32], corpus_dir, preset, fp16, log, max_batches)

        def kit_once(r: int, preset: str = preset) -> dict:
            cells, facts = run_kit(preset, modes, work / f"kit-{preset}-round{r}", repeats, max_batches, data,
                                   out / f"kit-{preset}.round{r}.log")
            env.update(facts)
            return {m: kit_rate(cells.get(m)) for m in modes}

        pairs = [(label, mode) for label, (*_, mode) in chosen.items() if mode]
        got = measure_rounds(runs, list(chosen), original_once, kit_once if modes else (lambda r: {}),
                             say=lambda text, preset=preset: say(f"{preset}: {text}"),
                             max_runs=max_runs, stop=ci_stop(pairs, ci) if pairs else None)
        gpu_bound: dict = {}
        if modes:  # the graphed engine's cells once: the GPU's own rate for this model, for the host-bound test
            say(f"{preset}: the graphed engine's cells (the GPU-bound rate, once)")
            cells, _ = run_kit(preset, modes, work / f"graphed-{preset}", 1, max_batches, data,
                               out / f"graphed-{preset}.log", engine="graphed")
            gpu_bound = {m: kit_rate(cells.get(m)) for m in modes}
        report.setdefault("device", env.get("device"))
        report.setdefault("torch", env.get("torch"))
        report.setdefault("rounds", {})[preset] = {"rounds": got["rounds"], "stopped": got["stopped"]}
        for label, (_l, _tf32, _fp16, kit_mode) in chosen.items():
            o_runs = [x["tokens_per_s"] for x in got["original"][label]]
            k_runs = got["kit"].get(kit_mode, []) if kit_mode else []
            o, k = median_or_none(o_runs), median_or_none(k_runs)
            est = ratio_with_ci(k_runs, o_runs) if kit_mode else ratio_with_ci([], [])
            half = est["ci_half_width_rel"]
            report["rows"].append({
                "preset": preset, "original": label, "kit_cell": kit_mode, "original_tokens_per_s": o,
                "original_tokens_per_s_runs": o_runs, "kit_tokens_per_s": k, "kit_tokens_per_s_rounds": k_runs,
                "kit_over_original": (k / o) if k and o else None,
                "kit_over_original_ci95": [est["ci_low"], est["ci_high"]] if kit_mode else None,
                "ci_half_width_rel": half,
                "ci_within_target": (half is not None and half <= ci) if kit_mode else None,
                "rounds": got["rounds"], "stopped": got["stopped"],
                "graphed_tokens_per_s": gpu_bound.get(kit_mode) if kit_mode else None,
                **(host_bound(k, gpu_bound.get(kit_mode)) if kit_mode else {"gpu_busy_estimate": None, "host_bound": None}),
                "kit_over_original_by_round": [(kr / orr) if kr and orr else None for kr, orr in zip(k_runs, o_runs)],
                "original_ms_per_batch_windows": [x["ms_per_batch_windows"] for x in got["original"][label]],
                "command": got["original"][label][0]["command"] if got["original"][label] else None})
        report.setdefault("order", {})[preset] = [list(x) for x in got["order"]]
        (out / "fidelity.json").write_text(json.dumps(report, indent=2))  # after each preset: a time-out keeps it
    return report


def stop_text(rounds: dict | None, target: float | None) -> str:
    """How a preset's rounds ended, in words."""
    if not rounds:
        return "—"
    n, why = rounds.get("rounds"), rounds.get("stopped")
    if why == STOP_CI:
        return f"{n} rounds: every CI within ±{(target or CI_HALF_WIDTH):.0%}"
    if why == STOP_LIMIT:
        return f"{n} rounds: the round limit, a CI still wider than ±{(target or CI_HALF_WIDTH):.0%}"
    return f"{n} rounds (fixed)"


def verdict_text(row: dict) -> str:
    """The row's ratio judged: within the CI target or not, and host-bound where the kit cell is."""
    if row.get("host_bound"):
        return (f"host-bound (GPU busy ~{row['gpu_busy_estimate']:.0%}): compares two Python loops on this CPU, "
                "not the GPU's work")
    if row.get("ci_within_target") is False:
        return "CI wider than the target: more rounds needed to judge"
    if row.get("ci_within_target"):
        return "judged (CI within the target)"
    return "—"


def format_table(report: dict) -> str:
    """The Markdown table the command prints (and docs/fidelity.md shows)."""
    lines = [f"{report.get('device')}, torch {report.get('torch')}, corpus: {report['corpus'].get('source')}"]
    target = report.get("ci_half_width_target")
    for preset, rounds in (report.get("rounds") or {}).items():
        lines.append(f"{preset}: {stop_text(rounds, target)}")
    lines += ["| preset | original | kit cell | original tokens/s | kit tokens/s | kit ÷ original | 95% CI | by round | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["rows"]:
        k = f"{r['kit_tokens_per_s']:,.0f}" if r["kit_tokens_per_s"] else "—"
        ratio = f"{r['kit_over_original']:.3f}" if r["kit_over_original"] else "—"
        ci_pair = r.get("kit_over_original_ci95") or [None, None]
        ci_cell = (f"[{ci_pair[0]:.3f}, {ci_pair[1]:.3f}]" if None not in ci_pair else "—" if not r.get("kit_cell")
                   else "n/a (1 round)" if (r.get("rounds") or 0) < 2 else UNBOUNDED.format(divisor="the original's"))
        rounds = ", ".join(f"{x:.3f}" if x else "—" for x in r.get("kit_over_original_by_round") or []) or "—"
        lines.append(f"| {r['preset']} | {r['original']} | {r['kit_cell'] or '—'} | {r['original_tokens_per_s']:,.0f} | {k} | {ratio} "
                     f"| {ci_cell} | {rounds} | {verdict_text(r)} |")
    return "\n".join(lines)

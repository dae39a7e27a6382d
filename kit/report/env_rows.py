"""The run's machine and sessions as text, shared by ``kit bundle show`` (kit.report.show) and
``report.html`` (kit.report.html.run_report): what a GPU library was on a CPU run, the machine's name
with its host id, one row per session before a resume."""

from __future__ import annotations

from kit.bundle.envinfo import EnvSummary
from kit.bundle.inert import inert
from kit.compare.fmt import fmt_machine
from kit.env import record as env_record


def cpu_only(env: EnvSummary) -> bool:
    return env.gpu == "CPU only"


def used_or_built(value: str, env: EnvSummary) -> str:
    """What a GPU library was on this run: on a CPU run it was not used, only
    built into torch (so the version is shown as that, not as what ran)."""
    if not cpu_only(env):
        return value
    return "not used (CPU run)" + (f"; torch built with {value}" if value and value != "unknown" else "")


def machine_name(name: str, environment: dict | None) -> str:
    """The machine of a run (kit.compare.fmt.fmt_machine): its host name and the host id its
    environment record holds."""
    hid = env_record.host_id_of(environment) if isinstance(environment, dict) else None
    return fmt_machine(name, inert(hid) if isinstance(hid, str) and hid.strip() else None)


def _host_of(session: dict, run_environment: dict) -> str:
    """Where an earlier session ran, in the words of the machine row: "this host" where its host id is
    the run's, else its own name and id."""
    sm = env_record.session_summary(session)
    if sm["host_id"] and sm["host_id"] == env_record.host_id_of(run_environment):
        return "this host"
    host = session.get("host")
    name = host.get("name") if isinstance(host, dict) and isinstance(host.get("name"), str) else None
    if name:
        return "host " + machine_name(inert(name), session)
    return f"host {sm['host_id'] or 'unknown'}"


def earlier_session_rows(environment: dict) -> list[tuple[str, str]]:
    """One row per session before a resume (kit.env.record.keep_earlier_session): when, where,
    which kit, how many of the cells it measured."""
    rows = []
    for i, s in enumerate(x for x in environment.get("earlier_sessions") or [] if isinstance(x, dict)):
        sm = env_record.session_summary(s)
        rows.append((f"earlier session {i + 1}", f"{sm['collected_at'] or 'unknown'}: {len(sm['cells'])} cell(s) on "
                     f"{_host_of(s, environment)} ({', '.join(sm['gpu_uuids']) or 'no GPU recorded'}), kit commit "
                     f"{(sm['kit_commit'] or 'unknown')[:12]}"))
    return rows

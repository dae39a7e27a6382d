"""Which machine a run ran on: its host name and its host id (kit.env.record writes both into env.json).

The id is ``h-`` and 16 hex digits of a sha256: of the machine's own machine-id where the kit can read it
(machine-id(5): 32 hex digits made once per installation, the same across reboots and renames; only a
hash of it is recorded, as that page asks), else of the host name, a pseudonym that every machine of
that name shares. ``kit index history`` and ``--group-by host`` follow the id."""

from __future__ import annotations

import hashlib
import re
import socket
from pathlib import Path
from typing import Mapping


def host_id(name: str) -> str:
    """A stable opaque id for a host name (a pseudonym: same name, same id)."""
    return "h-" + hashlib.sha256(f"mpkit-host:{name}".encode()).hexdigest()[:16]


#: where the OS keeps the machine's own id (systemd's machine-id(5), D-Bus's older copy): 32 hex
#: digits made once per installation, the same across reboots and host renames
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
#: a host id as the kit writes it ("h-" and 16 hex digits): what KIT_HOST_ID may carry
HOST_ID_FORM = re.compile(r"h-[0-9a-f]{16}")


def machine_host_id(files: tuple | None = None) -> str | None:
    """This machine's host id from its machine-id (an app-specific hash, as machine-id(5) asks: the id
    itself is never recorded), or None where no file holds one (``files``: MACHINE_ID_FILES)."""
    for path in MACHINE_ID_FILES if files is None else files:
        try:
            raw = Path(path).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if re.fullmatch(r"[0-9a-f]{32}", raw):
            return "h-" + hashlib.sha256(f"mpkit-machine:{raw}".encode()).hexdigest()[:16]
    return None


def host_identity(env: Mapping[str, str], anonymize: bool, inside_container: bool,
                  machine_id_files: tuple | None = None) -> dict:
    """The host's name and id. The id names the machine where the kit can tell which: its machine-id
    (``host_id_from`` "machine-id"), read on the host itself, or given by ``kit launch`` as KIT_HOST_ID
    (a container's own /etc/machine-id is its image's, shared by every machine that runs it, so it is
    never read there); else a pseudonym of the host name ("host-name"), which machines of one name
    share (clouds call many a machine ``vm``)."""
    name = env.get("KIT_HOST_NAME") or socket.gethostname() or "unknown-host"
    given = env.get("KIT_HOST_ID", "")
    hid = given if HOST_ID_FORM.fullmatch(given) else None
    if hid is None and not inside_container:
        hid = machine_host_id(machine_id_files)
    source = "machine-id" if hid else "host-name"
    hid = hid or host_id(name)
    return {"name": hid if anonymize else name, "host_id": hid, "host_id_from": source, "anonymized": anonymize}

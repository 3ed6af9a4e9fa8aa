"""digest.py: the same sha1 and sha256 as hashlib's, through the interpreter's own implementations
while a process has hashed little (no OpenSSL loaded), then through hashlib."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from coding_os.digest import sha1_hex, sha256_hex


@given(st.lists(st.binary(max_size=3000), max_size=4))
def test_the_digests_are_hashlibs(parts: list[bytes]) -> None:
    assert sha1_hex(*parts) == hashlib.sha1(b"".join(parts)).hexdigest()
    assert sha256_hex(*parts) == hashlib.sha256(b"".join(parts)).hexdigest()


def test_a_process_that_hashes_little_loads_no_openssl_and_one_that_hashes_more_does() -> None:
    chunk = bytes(range(256)) * 40
    script = (
        "import sys\n"
        "from coding_os.digest import SMALL_TOTAL, sha1_hex, sha256_hex\n"
        "chunk = bytes(range(256)) * 40\n"
        "print(sha1_hex(chunk), sha256_hex(b'x', chunk), '_hashlib' in sys.modules)\n"
        "for _ in range(SMALL_TOTAL // len(chunk)):\n"
        "    sha1_hex(chunk)\n"
        "print(sha1_hex(chunk), '_hashlib' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    little, more = done.stdout.splitlines()
    sha1 = hashlib.sha1(chunk).hexdigest()
    assert little.split() == [sha1, hashlib.sha256(b"x" + chunk).hexdigest(), "False"]
    assert more.split() == [sha1, "True"]

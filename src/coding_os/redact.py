"""Secrets of known shapes, and their redaction before cos stores, logs or indexes a text
(DESIGN.md §11, "Private by default").

`redact(text)` replaces each secret by `[REDACTED:<shape>]`; where a shape is found by its name
(`AWS_SECRET_ACCESS_KEY=…`, `Authorization: Bearer …`, `https://user:…@host`) the name stays and
only the value goes. The shapes:

    private_key          PEM private key blocks (-----BEGIN … PRIVATE KEY----- to its END)
    aws_access_key_id    AKIA / ASIA / ABIA / ACCA + 16
    aws_secret_access_key  40 characters after aws_secret_access_key, SecretAccessKey, …
    github_token, github_fine_grained_token, gitlab_token, slack_token, slack_webhook,
    anthropic_api_key, openai_api_key, google_api_key, stripe_live_key, stripe_test_key,
    npm_token, pypi_token, huggingface_token, sendgrid_api_key, jwt
    authorization        the credentials of an `Authorization: Bearer|Basic|Token` header,
                         or a bare `Bearer <token>` (16 or more token characters, a digit)
    url_password         the password of `scheme://user:password@host`
    secret_assignment    the value of `NAME_KEY=`, `NAME_TOKEN=`, `NAME_SECRET=`, `PASSWORD=`
                         (also `export X=`, `X: v`, `"x": "v"`, `--password v`, `api_key = "v"`)

The block_secrets gate (hooks/gates.py) refuses the shapes up to `jwt` (`BLOCKING`): each is
recognised by the value itself, or (an AWS secret key) by the name right before it. The last three
are recognised by a name or scheme that could come before anything: redacted, never blocked on.

Redaction is on unless `.coding-os.yaml` says `redact: false` (`enabled`). Hot path: a text
holding none of the shapes' trigger substrings is returned as it is without importing `re`;
each shape's expression is compiled the first time a text holds its trigger.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Iterable, Mapping

__all__ = ["SHAPES", "BLOCKING", "MARKER", "redact", "redact_value", "first_secret", "enabled",
           "configured"]

MARKER = "[REDACTED:{}]"

# A value (of an assignment, a header): quoted, or a run of characters that end a shell word.
# A value starting with `$`, `=` or `[REDACTED:` is a reference, a comparison or already gone.
_VALUE = (r"(?!\$|\[REDACTED:|=)(?:\"(?!\$)[^\"\n]{1,500}\"|'[^'\n]{1,500}'"
          r"|[^\s\"'`;&|<>(){}\[\],]{1,500})")
_NAME_WORDS = (r"api[_-]?key|apikey|secret[_-]?key|access[_-]?key|private[_-]?key|"
               r"client[_-]?secret|(?:auth|access|refresh|api|bearer|session|id)[_-]?token|"
               r"secret|token|password|passwd|passphrase")

# name, trigger substrings (a text holding none cannot match; `?` first: case-insensitive),
# expression (a group named `keep` is kept, the rest replaced), recognised by its value itself.
SHAPES: tuple[tuple[str, tuple[str, ...], str, bool], ...] = (
    ("private_key", ("PRIVATE KEY",),
     r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
     r"(?s:.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z))", True),
    ("aws_access_key_id", ("AKIA", "ASIA", "ABIA", "ACCA"),
     r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", True),
    ("aws_secret_access_key", ("?secret",),
     r"(?P<keep>(?i:\b(?:aws)?[_-]?secret[_-]?(?:access[_-]?)?key)[\"']?\s*(?:[:=]\s*|\s+)"
     r"[\"']?)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])", True),
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
     r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", True),
    ("github_fine_grained_token", ("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{22,}", True),
    ("gitlab_token", ("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,}", True),
    ("slack_token", ("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}", True),
    ("slack_webhook", ("hooks.slack.com",),
     r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+", True),
    ("anthropic_api_key", ("sk-ant-",), r"\bsk-ant-[A-Za-z0-9_-]{20,}", True),
    # sk- keys are mixed-case letters and digits; hyphenated words (`sk-some-long-name`) are not.
    ("openai_api_key", ("sk-",),
     r"\bsk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Z])"
     r"(?=[A-Za-z0-9_-]*[a-z])[A-Za-z0-9_-]{32,}", True),
    ("google_api_key", ("AIza",), r"\bAIza[0-9A-Za-z_-]{35}", True),
    ("stripe_live_key", ("_live_",), r"\b(?:sk|rk)_live_[0-9A-Za-z]{16,}", True),
    ("stripe_test_key", ("_test_",), r"\b(?:sk|rk)_test_[0-9A-Za-z]{16,}", True),
    ("npm_token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b", True),
    ("pypi_token", ("pypi-",), r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", True),
    ("huggingface_token", ("hf_",), r"\bhf_[A-Za-z0-9]{34}\b", True),
    ("sendgrid_api_key", ("SG.",), r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b", True),
    ("jwt", ("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", True),
    ("authorization", ("?authorization", "Bearer"),
     r"(?P<keep>(?i:\bauthorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
     r"(?i:(?:bearer|basic|token|digest)[ \t]+))(?!\$|\[REDACTED:)[A-Za-z0-9._~+/-]{8,}=*"
     # a bare `Bearer <token>`: a long run of token characters with a digit in it
     r"|(?P<keep2>\bBearer[ \t]+)(?=[A-Za-z0-9._~+/-]*\d)(?!\[REDACTED:)"
     r"[A-Za-z0-9._~+/-]{16,}=*", False),
    ("url_password", ("://",),
     r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@\"'<>\[\]]{1,200}:)(?!\$)[^/\s@\"'<>\[\]]{1,200}"
     r"(?=@)", False),
    ("secret_assignment", ("?key", "?token", "?secret", "?pass"),
     # NAME_KEY= style (upper case, as environments and .env files write them) ...
     r"(?P<keep>\b[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|_PASS)[\"']?"
     r"[ \t]*(?:=[ \t]*|:[ \t]+|:(?=[\"'])))" + _VALUE +
     # ... the names code and configuration use, in any case, with a quoted value or after `=`
     r"|(?P<keep2>(?<![A-Za-z0-9])(?i:(?:[a-z0-9]+[_-])*(?:" + _NAME_WORDS + r"))[\"']?"
     r"(?:[ \t]*[:=][ \t]*(?=[\"'])|[ \t]*=[ \t]*))" + _VALUE +
     # ... and command-line options: --password VALUE, --token=VALUE
     r"|(?P<keep3>(?<![A-Za-z0-9-])--?(?i:(?:[a-z0-9]+-)*(?:" + _NAME_WORDS.replace("[_-]?", "-?")
     + r"))(?:=|[ \t]+))" + _VALUE, False),
)
BLOCKING = tuple(name for name, _, _, blocking in SHAPES if blocking)
# What a text must also hold for these shapes to be looked for: their separators.
_ALSO = {"secret_assignment": ("=", ":", "--")}

_COMPILED: dict[str, re.Pattern[str]] = {}
# No shorter text holds a trigger.
_SHORTEST = min(len(trigger.lstrip("?")) for _, triggers, _, _ in SHAPES for trigger in triggers)
# Every trigger, in one search each: the triggers as written, and the case-blind ones in the
# text's lower case. Most texts hold none, and are done after these two; in a process that has
# imported `re` already (an import, a listing: never the hook's, which imports none for a text
# without a trigger).
_TRIGGERS: list[re.Pattern[str]] = []


def _triggers() -> list[re.Pattern[str]]:
    if not _TRIGGERS:
        import re

        for blind in (False, True):
            words = {trigger[1:] if blind else trigger for _, triggers, _, _ in SHAPES
                     for trigger in triggers if (trigger[0] == "?") == blind}
            _TRIGGERS.append(re.compile(_any_of(words)))
    return _TRIGGERS


def _any_of(words: Iterable[str]) -> str:
    """An expression found where any of `words` is: their alternation with the beginnings
    they share written once (`A(?:KIA|SIA)`), so that a search tries each place of a text
    once per first character, not once per word. A word holding another is left out: the
    other is found first."""
    import re

    unique = set(words)
    kept = sorted(word for word in unique
                  if not any(other != word and other in word for other in unique))
    if not kept:
        return "(?!)"  # found nowhere

    def branch(rests: list[str]) -> str:
        if "" in rests:  # a word ends here: what follows it is not needed to find one
            return ""
        by_first: dict[str, list[str]] = {}
        for rest in rests:
            by_first.setdefault(rest[0], []).append(rest[1:])
        parts = [re.escape(first) + branch(tails) for first, tails in sorted(by_first.items())]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"

    return branch(kept)


def _candidates(text: str) -> list[int]:
    """The indexes of the shapes whose trigger substrings `text` holds."""
    if _TRIGGERS or "re" in sys.modules:
        exact, blind = _triggers()
        if exact.search(text) is None and blind.search(text.lower()) is None:
            return []
    lower: str | None = None
    found = []
    for index, (name, triggers, _, _) in enumerate(SHAPES):
        also = _ALSO.get(name)
        if also is not None and not any(part in text for part in also):
            continue
        for trigger in triggers:
            if trigger[0] == "?":
                if lower is None:
                    lower = text.lower()
                if trigger[1:] in lower:
                    break
            elif trigger in text:
                break
        else:
            continue
        found.append(index)
    return found


def _pattern(index: int) -> re.Pattern[str]:
    name, _, body, _ = SHAPES[index]
    compiled = _COMPILED.get(name)
    if compiled is None:
        import re

        compiled = _COMPILED[name] = re.compile(body)
    return compiled


def redact(text: str) -> str:
    """`text` with every secret of a known shape replaced by `[REDACTED:<shape>]` (the name of
    an assignment or header kept); the same object when it holds none."""
    if len(text) < _SHORTEST:
        return text
    candidates = _candidates(text)
    if not candidates:
        return text
    for index in candidates:
        name = SHAPES[index][0]
        marker = MARKER.format(name)

        def replace(match: re.Match[str], marker: str = marker) -> str:
            groups = match.groupdict()
            keep = groups.get("keep") or groups.get("keep2") or groups.get("keep3") or ""
            return keep + marker

        text = _pattern(index).sub(replace, text)
    return text


def redact_value(value: object) -> object:
    """`value` with `redact` applied to every string in it (through dicts, lists and tuples);
    the same object when nothing changed."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        changed: dict[object, object] | None = None
        for key, item in value.items():
            new = _redacted_item(item)
            if new is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = new
        return value if changed is None else changed
    if isinstance(value, (list, tuple)):
        items: list[object] | None = None
        for index, item in enumerate(value):
            new = _redacted_item(item)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else type(value)(items)
    return value


def _redacted_item(item: object) -> object:
    """`redact_value(item)`, without a call for what holds no string (a number, None)."""
    return redact_value(item) if isinstance(item, (str, dict, list, tuple)) else item


def first_secret(texts: Iterable[str], blocking_only: bool = True) -> str | None:
    """The name of the shape of the first secret in `texts` (the leftmost in the first text that
    holds one), or None; only the shapes recognised by their value unless `blocking_only` is
    false."""
    for text in texts:
        best: tuple[int, int] | None = None
        for index in _candidates(text):
            if blocking_only and not SHAPES[index][3]:
                continue
            match = _pattern(index).search(text)
            if match is not None and (best is None or match.start() < best[0]):
                best = (match.start(), index)
        if best is not None:
            return SHAPES[best[1]][0]
    return None


def enabled(config: Mapping[str, object]) -> bool:
    """Whether a project with this `.coding-os.yaml` redacts: unless it says `redact: false`."""
    return config.get("redact") is not False


def configured(state_dir: str) -> bool:
    """Whether the project of `state_dir` (its parent directory) redacts; a configuration that
    cannot be read redacts."""
    import os

    from coding_os.config import load_config_cached
    from coding_os.errors import InvalidInput

    try:
        return enabled(load_config_cached(os.path.dirname(state_dir), state_dir))
    except InvalidInput:
        return True

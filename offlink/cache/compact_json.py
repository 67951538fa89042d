"""The cache entries' JSON: written as json.dumps(sort_keys, compact) writes it and read back,
without importing json on `offlink cc`'s warm path."""

from __future__ import annotations


def json_text(value) -> str:
    """json.dumps(value, sort_keys=True, separators=(",", ":")), the same text, for metadata
    of dicts with string keys, lists, tuples, strings, ints, booleans and None (json.dumps
    writes anything else) without importing json: with the re and enum it imports, ~8 ms of
    every `offlink cc`, which writes entries and reads none."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    kind = type(value)
    if kind is str:
        return _json_string(value)
    if kind is int:
        return int.__repr__(value)
    if kind is list or kind is tuple:
        return "[" + ",".join(json_text(v) for v in value) + "]"
    if kind is dict and all(type(k) is str for k in value):
        return "{" + ",".join(_json_string(k) + ":" + json_text(value[k])
                              for k in sorted(value)) + "}"
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                 "\b": "\\b", "\f": "\\f"}


def _json_string(text: str) -> str:
    """A string as json.dumps writes it (ensure_ascii): printable ASCII but '"' and '\\' as it
    is, the usual short escapes, anything else as \\uXXXX (a surrogate pair above U+FFFF)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            out.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
    return '"' + "".join(out) + '"'


def json_value(text: bytes):
    """json.loads(text), without importing json where `text` is what json_text writes (a warm
    `offlink cc` reads two entries: json with its re and enum cost it ~8 ms). Anything this
    reader does not take (whitespace, floats, non-ASCII bytes, a doubtful escape, an error)
    goes to json.loads, which then decides."""
    try:
        s = text.decode("ascii")
        value, end = _json_parse(s, 0)
        if end == len(s):
            return value
    except (ValueError, IndexError, KeyError, RecursionError):
        pass
    import json

    return json.loads(text)


_JSON_UNESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                   "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _json_parse(s: str, i: int):
    """The JSON value at s[i] and the index after it; ValueError or IndexError where it is
    not the compact JSON json_text writes."""
    c = s[i]
    if c == '"':
        return _json_parse_string(s, i)
    if c == "{":
        out: dict = {}
        i += 1
        if s[i] == "}":
            return out, i + 1
        while True:
            if s[i] != '"':
                raise ValueError
            key, i = _json_parse_string(s, i)
            if s[i] != ":":
                raise ValueError
            out[key], i = _json_parse(s, i + 1)
            if s[i] == "}":
                return out, i + 1
            if s[i] != ",":
                raise ValueError
            i += 1
    if c == "[":
        items: list = []
        i += 1
        if s[i] == "]":
            return items, i + 1
        while True:
            item, i = _json_parse(s, i)
            items.append(item)
            if s[i] == "]":
                return items, i + 1
            if s[i] != ",":
                raise ValueError
            i += 1
    for word, value in (("true", True), ("false", False), ("null", None)):
        if s.startswith(word, i):
            return value, i + len(word)
    j = i + 1 if c == "-" else i
    k = j
    while k < len(s) and "0" <= s[k] <= "9":
        k += 1
    if k == j or (s[j] == "0" and k > j + 1) or (k < len(s) and s[k] in ".eE"):
        raise ValueError  # not an integer as JSON writes one: json.loads decides
    return int(s[i:k]), k


def _json_parse_string(s: str, i: int) -> tuple[str, int]:
    parts = []
    j = i + 1
    while True:
        end = s.index('"', j)
        escape = s.find("\\", j, end)
        chunk = s[j : end if escape < 0 else escape]
        if not chunk.isprintable():  # a control character: json.loads refuses it
            raise ValueError
        parts.append(chunk)
        if escape < 0:
            return "".join(parts), end + 1
        e = s[escape + 1]
        if e != "u":
            parts.append(_JSON_UNESCAPES[e])  # KeyError: not a JSON escape
            j = escape + 2
            continue
        code = _json_hex(s, escape + 2)
        j = escape + 6
        if 0xD800 <= code <= 0xDBFF and s.startswith("\\u", j):
            low = _json_hex(s, j + 2)
            if 0xDC00 <= low <= 0xDFFF:  # a surrogate pair, as json.loads joins it
                code = 0x10000 + ((code - 0xD800) << 10 | (low - 0xDC00))
                j += 6
        parts.append(chr(code))


def _json_hex(s: str, i: int) -> int:
    digits = s[i : i + 4]
    if len(digits) != 4 or not _HEX.issuperset(digits):
        raise ValueError
    return int(digits, 16)

"""The cache entries' JSON read back without importing json, on `offlink cc`'s warm hit
(benchmarks/health/RESULTS.md): the compact JSON Store.put writes (json.dumps, sort_keys,
no spaces) parsed here; anything else goes to json.loads."""

from __future__ import annotations


def json_value(text: bytes):
    """json.loads(text), without importing json where `text` is compact JSON of dicts, lists,
    strings, integers, booleans and null. Anything this reader does not take (whitespace,
    floats, non-ASCII bytes, a doubtful escape, an error) goes to json.loads, which decides."""
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

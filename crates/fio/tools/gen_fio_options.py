#!/usr/bin/env python3
"""Generate crates/fio/src/parse/fio_options.rs from a fio source tree.

The table lists every option fio's job files accept (options.c, the engine
option tables in engines/*.c with the engines that define them, the
cmdprio options of engines/cmdprio.h and the profile options in
profiles/*.c), with the facts the parser needs: aliases, type, default,
range, choices, default time unit and per-direction values.
What iosched does with each option is decided by hand in
src/parse/disposition.rs, not here.

Usage (from crates/fio, with a checkout of https://github.com/axboe/fio):

    tools/gen_fio_options.py FIO_DIR "$(git -C FIO_DIR rev-parse HEAD)" > src/parse/fio_options.rs
    rustfmt --edition 2021 src/parse/fio_options.rs

Only the table's facts come from fio; no fio code is copied.
"""
import os
import re
import sys

# Symbolic bounds used in the option tables, with their values on Linux.
SYMBOLS = {
    "IOPRIO_MIN_PRIO": 0,
    "IOPRIO_MAX_PRIO": 7,
    "IOPRIO_MIN_PRIO_CLASS": 0,
    "IOPRIO_MAX_PRIO_CLASS": 3,
    "IOPRIO_MIN_PRIO_CLASS + 1": 1,
    "IOPRIO_MIN_PRIO_HINT": 0,
    "IOPRIO_MAX_PRIO_HINT": 1023,
    "MAX_TRIM_RANGE": 256,
    "ZBD_MAX_WRITE_ZONES": 4096,
    "FLOW_MAX_WEIGHT": 1000,
    "DEF_LOG_ENTRIES": 1024,
    "MAX_LOG_ENTRIES": 1024 * 1024,
    "1024ULL": 1024,
    "512 * 1024 * 1024ULL": 512 * 1024 * 1024,
    # sizeof(struct verify_header) is 48 bytes on every 64-bit Linux ABI.
    "sizeof(struct verify_header)": 48,
    "2 * sizeof(struct verify_header)": 96,
}
DEFAULT_SYMBOLS = {
    "FIO_PREFERRED_ENGINE": "psync",
    "__fio_stringify(DEF_LOG_ENTRIES)": "1024",
    "__fio_stringify(FIO_HUGE_PAGE)": "4194304",
}
KINDS = {
    "FIO_OPT_STR": "Str",
    "FIO_OPT_STR_ULL": "StrUll",
    "FIO_OPT_STR_MULTI": "StrMulti",
    "FIO_OPT_STR_VAL": "StrVal",
    "FIO_OPT_STR_VAL_TIME": "StrValTime",
    "FIO_OPT_STR_STORE": "StrStore",
    "FIO_OPT_RANGE": "Range",
    "FIO_OPT_INT": "Int",
    "FIO_OPT_ULL": "Ull",
    "FIO_OPT_BOOL": "Bool",
    "FIO_OPT_FLOAT_LIST": "FloatList",
    "FIO_OPT_STR_SET": "StrSet",
    "FIO_OPT_STR_VAL_ZONE": "StrValZone",
    "FIO_OPT_DEPRECATED": "Deprecated",
    "FIO_OPT_SOFT_DEPRECATED": "SoftDeprecated",
}


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def matching_brace(text, start):
    """Index just past the brace that closes the one opened before `start`."""
    depth, i, in_string = 1, start, False
    while depth:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        i += 1
    return i


def top_level_entries(body):
    entries, i = [], 0
    while True:
        j = body.find("{", i)
        if j < 0:
            return entries
        end = matching_brace(body, j + 1)
        entries.append(body[j + 1 : end - 1])
        i = end


def field(entry, name):
    m = re.search(r"\." + name + r'\s*=\s*((?:"(?:[^"\\]|\\.)*"\s*)+|[^,\n]+)', entry)
    if not m:
        return None
    value = m.group(1).strip().rstrip("\\").strip()
    if value.startswith('"'):
        value = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', value))
    return value


def parse_entry(entry):
    choices = []
    posval = re.search(r"\.posval\s*=\s*\{", entry)
    top = entry
    if posval:
        end = matching_brace(entry, posval.end())
        choices = re.findall(r'\.ival\s*=\s*"([^"]*)"', entry[posval.end() : end])
        top = entry[: posval.start()] + entry[end:]
    option = {k: field(top, k) for k in (
        "name", "alias", "type", "help", "def", "minval", "maxval", "is_seconds",
        "is_time", "off1", "off2", "off3", "minfp", "maxfp", "prof_name")}
    option["choices"] = choices
    return option


def option_tables(path, pattern):
    text = strip_comments(open(path).read())
    found = []
    for m in re.finditer(pattern, text):
        end = matching_brace(text, m.end())
        body = text[m.end() : end - 1]
        body = body.replace("CMDPRIO_OPTIONS(", "CMDPRIO_OPTIONS_(")
        for entry in top_level_entries(body):
            option = parse_entry(entry)
            if option["name"] and option["name"] != "NULL":
                found.append(option)
        if "CMDPRIO_OPTIONS_(" in body:
            found.extend(cmdprio_options(os.path.dirname(path)))
    return found


def cmdprio_options(engine_dir):
    text = strip_comments(open(os.path.join(engine_dir, "cmdprio.h")).read())
    start = text.index("#define CMDPRIO_OPTIONS")
    body = text[start : text.index("#else", start)].replace("\\\n", "\n")
    body = body[body.index("{") :]
    return [parse_entry(e) for e in top_level_entries(body)]


def engine_names(path):
    text = strip_comments(open(path).read())
    names = []
    for m in re.finditer(r"struct ioengine_ops\s+\w+\s*=\s*\{(.*?)\n\};", text, flags=re.S):
        name = re.search(r'\.name\s*=\s*"([^"]+)"', m.group(1))
        if name and re.search(r"\.options\s*=", m.group(1)):
            names.append(name.group(1))
    return names


def number(text):
    if text is None:
        return None
    text = text.strip()
    if text in SYMBOLS:
        return SYMBOLS[text]
    try:
        return int(text, 0)
    except ValueError:
        sys.exit(f"unknown bound {text!r}: add it to SYMBOLS")


def rust_str(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def opt_str(text):
    return "None" if text is None else f"Some({rust_str(text)})"


def opt_num(value):
    return "None" if value is None else f"Some({value})"


def main():
    root, commit = sys.argv[1], sys.argv[2]
    options = {}
    order = []

    def add(option, scope, owners):
        name = option["name"]
        if option["type"] == "FIO_OPT_UNSUPPORTED":
            return
        if name in options:
            known = options[name]
            if known["scope"] == scope and scope == "Engines":
                for owner in owners:
                    if owner not in known["owners"]:
                        known["owners"].append(owner)
            return
        option["scope"] = scope
        option["owners"] = list(owners)
        options[name] = option
        order.append(name)

    for option in option_tables(os.path.join(root, "options.c"),
                                r"struct fio_option fio_options\[FIO_MAX_OPTS\]\s*=\s*\{"):
        add(option, "General", [])

    engine_dir = os.path.join(root, "engines")
    # Engines iosched runs come first, so that a name shared with another engine keeps their
    # definition.
    files = sorted(os.listdir(engine_dir), key=lambda f: (f not in ("sync.c", "libaio.c", "io_uring.c"), f))
    for name in files:
        if not name.endswith(".c") or name == "skeleton_external.c":
            continue
        path = os.path.join(engine_dir, name)
        owners = engine_names(path)
        if name in ("glusterfs.c",):
            owners = ["gfapi", "gfapi_async"]
        if not owners:
            continue
        for option in option_tables(path, r"struct fio_option \w*options\[\]\s*=\s*\{"):
            add(option, "Engines", owners)

    for name in ("act.c", "tiobench.c"):
        path = os.path.join(root, "profiles", name)
        for option in option_tables(path, r"struct fio_option options\[\]\s*=\s*\{"):
            add(option, "Profile", [name[:-2]])

    print(f"//! fio's job options, generated by `tools/gen_fio_options.py` from fio commit {commit}.")
    print("//! Do not edit by hand: regenerate, then update `disposition.rs`.")
    print()
    print("use super::table::{FioOption, Kind, Scope, TimeUnit};")
    print()
    print("/// Every option fio's job files accept, in fio's order (options.c, then engines, then")
    print("/// profiles).")
    print("pub(super) static FIO_OPTIONS: &[FioOption] = &[")
    for name in order:
        o = options[name]
        kind = KINDS[o["type"]]
        time = "None"
        if o["is_seconds"] == "1":
            time = "Some(TimeUnit::Seconds)"
        elif o["is_time"] == "1" or kind == "StrValTime":
            time = "Some(TimeUnit::Microseconds)"
        directions = 1
        if o["off2"] and o["off3"]:
            directions = 3
        elif o["off2"]:
            directions = 2
        default = o["def"]
        if default in DEFAULT_SYMBOLS:
            default = DEFAULT_SYMBOLS[default]
        minimum = number(o["minval"])
        maximum = number(o["maxval"])
        if kind == "Bool":
            minimum, maximum = 0, 1
        if o["scope"] == "General":
            scope = "Scope::General"
        elif o["scope"] == "Engines":
            scope = "Scope::Engines(&[" + ", ".join(rust_str(e) for e in o["owners"]) + "])"
        else:
            scope = f"Scope::Profile({rust_str(o['owners'][0])})"
        float_range = "None"
        if o["minfp"] is not None or o["maxfp"] is not None:
            float_range = f"Some(({float(o['minfp'] or 0)!r}, {float(o['maxfp'] or 0)!r}))"
        print("    FioOption {")
        print(f"        name: {rust_str(name)},")
        print(f"        alias: {opt_str(o['alias'])},")
        print(f"        kind: Kind::{kind},")
        print(f"        default: {opt_str(default)},")
        print(f"        min: {opt_num(minimum)},")
        print(f"        max: {opt_num(maximum)},")
        print(f"        float_range: {float_range},")
        print(f"        time_unit: {time},")
        print(f"        directions: {directions},")
        print("        choices: &[" + ", ".join(rust_str(c) for c in o["choices"]) + "],")
        print(f"        scope: {scope},")
        print("    },")
    print("];")


if __name__ == "__main__":
    main()

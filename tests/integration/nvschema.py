"""The result schema (schema/result.schema.json) for the integration tests: one
validator per $defs entry, the schema version (from its $id and from
include/numval/result.h), and mutated copies of real cases that the validator
must reject, so that a test which validates is shown able to fail.

Needs python3-jsonschema (Debian 12: 4.10; scripts/deps.sh test installs it).
Draft 2020-12, and no keyword beyond what 4.10 implements."""
import copy
import json
import os
import re
import sys

try:
    import jsonschema
except ImportError:  # a missing validator is a failure, never a skip
    print("not ok - python3 module 'jsonschema' missing: run scripts/deps.sh test "
          "(Debian package python3-jsonschema)", flush=True)
    sys.exit(1)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCHEMA_PATH = os.path.join(ROOT, "schema", "result.schema.json")
HEADER_PATH = os.path.join(ROOT, "include", "numval", "result.h")


def load():
    with open(SCHEMA_PATH) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


SCHEMA = load()


def validator(name=None):
    """A validator for the whole document (name None) or for $defs[name]. The
    $defs travel along, so "#/$defs/..." references resolve without a registry
    (the same code for jsonschema 4.10 and later releases)."""
    if name is None:
        return jsonschema.Draft202012Validator(SCHEMA)
    if name not in SCHEMA["$defs"]:
        raise KeyError("no $defs entry '%s' in %s" % (name, SCHEMA_PATH))
    root = {"$schema": SCHEMA["$schema"], "$id": SCHEMA["$id"], "$defs": SCHEMA["$defs"],
            "$ref": "#/$defs/" + name}
    return jsonschema.Draft202012Validator(root)


def errors(v, doc, limit=5):
    """The first few errors as 'json/pointer: message' lines ([] when valid)."""
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path]):
        out.append("/%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message[:300]))
        if len(out) >= limit:
            break
    return out


def versions():
    """(version in the schema's $id, NV_RESULT_SCHEMA_VERSION in include/numval/result.h)."""
    m = re.search(r":(\d+)$", SCHEMA["$id"])
    with open(HEADER_PATH) as f:
        h = re.search(r"#define\s+NV_RESULT_SCHEMA_VERSION\s+(\d+)", f.read())
    return (int(m.group(1)) if m else None, int(h.group(1)) if h else None)


def mutations(case):
    """Copies of a valid case, each broken the way a drifting producer would
    break it, with what was done. Every one must be rejected."""
    out = []

    def mut(what, fn):
        c = copy.deepcopy(case)
        fn(c)
        out.append((what, c))

    mut("verdict removed", lambda c: c.pop("verdict"))
    mut("verdict 'passd'", lambda c: c.update(verdict="passd"))
    mut("unknown key 'max_ulps'", lambda c: c.update(max_ulps=1.0))
    mut("index as a string", lambda c: c.update(index=str(c.get("index", 0))))
    if "failure_class" in case:
        mut("failure_class 'accuracy'", lambda c: c.update(failure_class="accuracy"))
        mut("failure_class removed", lambda c: c.pop("failure_class"))
    if "dtype" in case:
        mut("dtype 'fp7'", lambda c: c.update(dtype="fp7"))
    if "mismatches" in case:
        mut("mismatches negative", lambda c: c.update(mismatches=-1))
    if "tolerance" in case:
        mut("tolerance without reason", lambda c: c["tolerance"].pop("reason"))
    if case.get("verdict") == "passed":
        mut("passed with an error", lambda c: c.update(error="x"))
    return out

#!/usr/bin/env bash
# Checks that every reference to a document points at something that exists.
#
#   scripts/check_doc_refs.sh
#
# In every *.c *.h *.sh *.yaml *.md file of the repository (tracked, or new
# and not ignored), it finds:
#   - a path ending in README.md or docs/<name>.md (repository-relative),
#     optionally followed by a section name: `docs/limiter.md "Overrides"`,
#     `docs/ARCHITECTURE.md, "Global state"`, `README.md's "Status"`,
#     `docs/operations.md section "Metrics"`, `README.md's "## Status"`
#     (the heading's own #s may be part of the name), also when a comment wraps
#     the name onto its next line;
#   - a Markdown link to a .md file or an anchor, relative to the file
#     that holds it: `[x](limiter.md#overrides)`, `[x](#metrics)`.
# It fails (exit 1, printing file:line and why) when the file does not
# exist, a named section is no heading of it (the name may stop short of
# the heading's end: "CL.THROTTLE, exactly" names "CL.THROTTLE, exactly
# (the GCRA rules)"), or an anchor is no heading's GitHub anchor.
# Headings inside ``` fences do not count. Needs bash, git and python3.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

files=$(mktemp)
trap 'rm -f "$files"' EXIT
git ls-files --cached --others --exclude-standard -- \
    '*.c' '*.h' '*.sh' '*.yaml' '*.md' |
    grep -v -E '^build[^/]*/' >"$files"

python3 - "$files" <<'PY'
import os, re, sys

def headings(path, cache={}):
    """(texts, anchors) of the Markdown headings of path, outside fences."""
    if path in cache:
        return cache[path]
    texts, anchors, seen, fence = [], set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
                continue
            m = None if fence else re.match(r"#{1,6} +(.*?)\s*$", line)
            if not m:
                continue
            text = m.group(1)
            texts.append(text.replace("`", "").lower())
            slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else "%s-%d" % (slug, n))
    cache[path] = (texts, anchors)
    return cache[path]

# A comment line's leader, removed when a reference wraps onto it.
LEADER = re.compile(r"\n[ \t]*(?:\*(?!/)|//|#(?![#!])|--)?[ \t]*")
PLAIN = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*(?:README|docs/[\w.-]+)\.md)"
                   r"(?:(?:,|'s)? +(?:section +)?\"([^\"]+)\")?")
LINK = re.compile(r"\]\(([^)\s]*?)(?:#([\w-]+))?\)")

bad = 0
def fail(path, text, pos, why):
    global bad
    bad += 1
    print("%s:%d: %s" % (path, text.count("\n", 0, pos) + 1, why))

for path in open(sys.argv[1]).read().split():
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # Join wrapped comment lines into one, keeping each offset mapped back
    # to its line: newlines are kept in a parallel index.
    joined, where = [], []
    i = 0
    for m in LEADER.finditer(text):
        joined.append(text[i:m.start()]); where.extend(range(i, m.start()))
        joined.append(" "); where.append(m.start())
        i = m.end()
    joined.append(text[i:]); where.extend(range(i, len(text)))
    flat = "".join(joined)
    for m in PLAIN.finditer(flat):
        ref, section = m.group(1), m.group(2)
        pos = where[m.start()]
        if flat[max(0, m.start() - 2):m.start()] == "](":
            continue  # a Markdown link: checked below, relative to its file
        if not os.path.isfile(ref):
            fail(path, text, pos, "%s does not exist" % ref)
            continue
        if section:
            name = " ".join(section.replace("`", "").lower().split())
            name = name.lstrip("# ")  # "## Deploying" names "Deploying"
            if not any(t.startswith(name) for t in headings(ref)[0]):
                fail(path, text, pos,
                     "%s has no section \"%s\"" % (ref, section))
    if not path.endswith(".md"):
        continue
    for m in LINK.finditer(text):
        target, anchor = m.group(1), m.group(2)
        if target and (re.match(r"[a-z]+:", target) or
                       not target.endswith(".md")):
            continue
        ref = os.path.normpath(os.path.join(os.path.dirname(path), target)) \
            if target else path
        if not os.path.isfile(ref):
            fail(path, text, m.start(), "%s does not exist" % ref)
        elif anchor and anchor not in headings(ref)[1]:
            fail(path, text, m.start(), "%s has no heading #%s" % (ref, anchor))
sys.exit(1 if bad else 0)
PY

# Builds the Redis 7 FUNCTION library text from the entry scripts of
# algorithms/ (the benchmark's copy of the rule the build applies; the
# integration tests have their own in lua_twin.c):
#
#   #!lua name=<lib>
#   <each entry's lines before its "--#call" line, "--#include" expanded;
#    every part pasted once for the whole library>
#   local function <name>_call(KEYS, ARGV)
#   <the entry's lines after "--#call">
#   end
#   redis.register_function{function_name = '<prefix><name>', ...}
#
# Usage: awk -v dir=algorithms [-v lib=cellgate] [-v prefix=cellgate_] \
#            -f lua_library.awk algorithms/gcra.lua algorithms/limiter.lua

# One load-time line: an include is replaced by its part the first time
# the library names it, and dropped after.
function add(line,    part) {
    if (line ~ /^--#include [a-z_]+$/) {
        part = substr(line, 12)
        if (!(part in seen)) {
            seen[part] = 1
            expand(dir "/lua/" part ".lua")
        }
    } else {
        head = head line "\n"
    }
}

function expand(file,    line, rc) {
    while ((rc = getline line < file) > 0) {
        add(line)
    }
    if (rc < 0) {
        print "lua_library.awk: cannot read " file > "/dev/stderr"
        exit 1
    }
    close(file)
}

BEGIN {
    if (lib == "") lib = "cellgate"
    if (prefix == "") prefix = "cellgate_"
    head = "#!lua name=" lib "\n"
    for (i = 1; i < ARGC; i++) {
        file = ARGV[i]
        name = file
        sub(/^.*\//, "", name)
        sub(/\.lua$/, "", name)
        names[i] = name
        marker = 0
        body[i] = ""
        while ((rc = getline line < file) > 0) {
            if (line == "--#call") {
                marker++
            } else if (marker) {
                body[i] = body[i] line "\n"
            } else {
                add(line)
            }
        }
        close(file)
        if (rc < 0 || marker != 1) {
            print "lua_library.awk: " file ": needs exactly one --#call line" > "/dev/stderr"
            exit 1
        }
    }
    out = head
    for (i = 1; i < ARGC; i++) {
        out = out "local function " names[i] "_call(KEYS, ARGV)\n" body[i] "end\n"
    }
    for (i = 1; i < ARGC; i++) {
        out = out "redis.register_function{function_name = '" prefix names[i] \
            "', callback = function(keys, args) return " names[i] \
            "_call(keys, args) end, flags = {'allow-cross-slot-keys'}}\n"
    }
    printf "%s", out
    exit 0
}

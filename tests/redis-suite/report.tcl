# Compares the runtest logs written by tests/redis-suite/run.sh: the direct
# run of each unit against the run through cellgate, test by test.
#
#   tclsh report.tcl OUT_DIR EXPECTED_FAIL_FILE PASS_PCT TIME_RATIO UNIT...
#
# Reads OUT_DIR/{direct,cellgate}/<unit>.log and OUT_DIR/times.tsv; prints
# the per-unit table, the totals, the tests that pass directly but fail
# through cellgate (also written with their full messages to
# OUT_DIR/failures.txt, and every test's outcome to OUT_DIR/results.tsv), and
# the line `N passed, N failed`. Exits 0 when the cellgate pass rate is
# >= PASS_PCT and cellgate time / direct time <= TIME_RATIO, else 1.

fconfigure stdout -translation lf -encoding iso8859-1

proc slurp {path} {
    if {![file readable $path]} { return "" }
    set f [open $path r]
    fconfigure $f -encoding iso8859-1
    set data [read $f]
    close $f
    return $data
}

# Parses one runtest log. Returns a dict:
#   tests     ordered list of {key status message}, status ok or err; key is
#             the test name, with " (#n)" from its second occurrence on
#   incidents list of messages that stopped tests from being reported:
#             runtest exceptions, errors outside any test (with --durable),
#             no progress (--timeout), the hard UNIT_TIMEOUT kill
#   hung      name of the test in progress at a --timeout, or ""
#   skipped   names of the tests skipped (--skipfile)
# A message is the text after the `[err]: ...` line up to the next line the
# test server prints (every one starts with `[`).
proc parse_log {path} {
    set tests {}
    set incidents {}
    set hung ""
    set skipped {}
    array set seen {}
    set cur ""        ;# what continuation lines belong to: test, incident or ""
    foreach line [split [slurp $path] "\n"] {
        set line [string trimright $line "\r"]
        if {[regexp {^\s+The End$} $line]} break
        if {[regexp {^\[(ok|err|skip|ignore|exception|TIMEOUT|KILLED)\]: ?(.*)$} $line -> st rest]} {
            set cur ""
            switch $st {
                ok - err {
                    if {$st eq "ok"} {
                        regsub { \(\d+ ms\)$} $rest {} name
                    } elseif {![regexp {^(.*) in tests/\S+\.tcl$} $rest -> name]} {
                        # --durable: an error in a start_server block, outside
                        # any test; the rest of the block did not run.
                        lappend incidents "error outside a test: $rest"
                        set cur incident
                        continue
                    }
                    if {[info exists seen($name)]} {
                        incr seen($name)
                        set key "$name (#$seen($name))"
                    } else {
                        set seen($name) 1
                        set key $name
                    }
                    lappend tests [list $key $st ""]
                    if {$st eq "err"} { set cur test }
                }
                exception {
                    lappend incidents "runtest exception: $rest"
                    set cur incident
                }
                TIMEOUT {
                    lappend incidents "no test progress for PROGRESS_TIMEOUT seconds (runtest --timeout)"
                    set cur incident
                }
                KILLED {
                    lappend incidents $rest
                }
                skip {
                    lappend skipped $rest
                }
            }
        } elseif {[regexp {^\[(\d+/\d+ done|ready|[a-z-]+)\]} $line] || [regexp {^Testing unit/} $line]} {
            set cur ""
        } elseif {$cur eq "test"} {
            set last [lindex $tests end]
            set msg [lindex $last 2]
            lset tests end 2 [expr {$msg eq "" ? $line : "$msg\n$line"}]
        } elseif {$cur eq "incident"} {
            if {[regexp {=> \(IN PROGRESS\) (.*)$} $line -> name]} { set hung $name }
            lset incidents end "[lindex $incidents end]\n$line"
        }
    }
    return [dict create tests $tests incidents $incidents hung $hung skipped $skipped]
}

# The message cut to `max` lines.
proc cut {msg max} {
    set lines [split [string trimright $msg] "\n"]
    if {[llength $lines] > $max} {
        set n [expr {[llength $lines] - $max}]
        set lines [concat [lrange $lines 0 [expr {$max - 1}]] [list "... ($n more lines)"]]
    }
    return [join $lines "\n"]
}
proc indent {text prefix} {
    return "$prefix[join [split $text "\n"] "\n$prefix"]"
}

# Why the tests a run did not report were not run.
proc missing_why {r note} {
    set why "not reported through cellgate"
    if {[dict get $r hung] ne ""} {
        set why "not run through cellgate: runtest --timeout while in '[dict get $r hung]'"
    } elseif {[llength [dict get $r incidents]]} {
        set why "not run through cellgate: [lindex [split [lindex [dict get $r incidents] 0] "\n"] 0]"
    }
    if {$note eq "cellgate-died"} {
        append why " (cellgate exited during the unit)"
    }
    return $why
}

# ---------------------------------------------------------------- recheck mode
#   tclsh report.tcl --recheck DIR UNIT
# When tests passing directly were not run through cellgate in DIR, prints
# the names to skip in a recheck (the tests that failed through cellgate, and
# the one that hung) and exits 0; else exits 1.
if {[lindex $argv 0] eq "--recheck"} {
    lassign $argv - dir unit
    set base [string map {/ _} $unit]
    set d [parse_log $dir/direct/$base.log]
    set c [parse_log $dir/cellgate/$base.log]
    array set cst {}
    foreach t [dict get $c tests] { set cst([lindex $t 0]) [lindex $t 1] }
    set missing 0
    foreach t [dict get $d tests] {
        if {[lindex $t 1] eq "ok" && ![info exists cst([lindex $t 0])]} { incr missing }
    }
    if {!$missing} { exit 1 }
    set names {}
    foreach t [dict get $c tests] {
        lassign $t key st
        regsub { \(#\d+\)$} $key {} name
        if {$st eq "err" && $name ni $names} { lappend names $name }
    }
    if {[dict get $c hung] ne "" && [dict get $c hung] ni $names} {
        lappend names [dict get $c hung]
    }
    if {![llength $names]} { exit 1 }
    foreach n $names { puts $n }
    exit 0
}

# ---------------------------------------------------------------- expected failures
lassign $argv out expfile pass_pct time_ratio
set units [lrange $argv 4 end]
# `unit: test name` per line (unit as in UNITS, `unit/` optional); `#` starts
# a comment line. A name matches every occurrence of that test.
array set expected {}
foreach line [split [slurp $expfile] "\n"] {
    set line [string trim $line]
    if {$line eq "" || [string index $line 0] eq "#"} continue
    set i [string first ": " $line]
    if {$i < 0} {
        puts "redis-suite: $expfile: not `unit: test name`: $line"
        continue
    }
    set u [string trim [string range $line 0 [expr {$i - 1}]]]
    if {![string match unit/* $u]} { set u "unit/$u" }
    set expected($u\t[string trim [string range $line [expr {$i + 2}] end]]) 0
}
proc expected_key {unit key} {
    regsub { \(#\d+\)$} $key {} name
    return "$unit\t$name"
}

# ---------------------------------------------------------------- times
array set secs {}
array set note {}
foreach line [split [slurp $out/times.tsv] "\n"] {
    if {$line eq ""} continue
    lassign [split $line "\t"] mode unit s rc n
    set secs($mode,$unit) $s
    set note($mode,$unit) $n
}

# ---------------------------------------------------------------- compare
set rows {}
set fails {}          ;# {unit key message} passing directly, failing through cellgate
set xfails {}         ;# the same, listed in EXPECTED_FAIL_FILE
set only_cg {}        ;# {unit key} failing directly, passing through cellgate
set warnings {}
set tot_dpass 0; set tot_dfail 0; set tot_cpass 0; set tot_cfail 0; set tot_miss 0
set tot_both 0; set tot_dsecs 0.0; set tot_csecs 0.0
set clean_dsecs 0.0; set clean_csecs 0.0; set clean_units 0
set tot_both1 0       ;# passing both ways in the first round (no recheck)
set recheck_found 0   ;# outcomes through cellgate taken from a recheck
set results [open $out/results.tsv w]
fconfigure $results -translation lf -encoding iso8859-1
puts $results "unit\ttest\tdirect\tcellgate"
foreach unit $units {
    set base [string map {/ _} $unit]
    set d [parse_log $out/direct/$base.log]
    set c [parse_log $out/cellgate/$base.log]
    set clean 1
    foreach mode {direct cellgate} r [list $d $c] {
        if {[llength [dict get $r incidents]] ||
            ([info exists note($mode,$unit)] && $note($mode,$unit) ni {- ""})} {
            set clean 0
        }
        foreach inc [dict get $r incidents] {
            lappend warnings "$unit ($mode): [cut $inc 12]"
        }
        if {[info exists note($mode,$unit)] && $note($mode,$unit) ni {- ""}} {
            lappend warnings "$unit ($mode): $note($mode,$unit)"
        }
        if {![info exists secs($mode,$unit)]} {
            lappend warnings "$unit ($mode): did not run"
        }
    }
    array unset cst
    array unset cmsg
    array unset cfrom
    foreach t [dict get $c tests] {
        lassign $t key st msg
        set cst($key) $st
        set cmsg($key) $msg
        set cfrom($key) 1
    }
    # Why tests are missing from the cellgate run, if they are.
    set hung [dict get $c hung]
    set why [missing_why $c [expr {[info exists note(cellgate,$unit)] ? $note(cellgate,$unit) : "-"}]]
    # Rechecks (run.sh): the unit again with what failed or hung skipped.
    # Only the tests the first round did not run are taken from them, and
    # only when they pass directly in that recheck too.
    set rechecks {}
    foreach rdir [lsort -dictionary [glob -nocomplain -type d $out/recheck-*]] {
        if {![file exists $rdir/cellgate/$base.log]} continue
        set k [string range [file tail $rdir] 8 end]
        set rd [parse_log $rdir/direct/$base.log]
        set rc [parse_log $rdir/cellgate/$base.log]
        foreach inc [dict get $rc incidents] {
            lappend warnings "$unit (cellgate, recheck [expr {$k - 1}]): [cut $inc 12]"
        }
        set rdst [dict create]
        foreach t [dict get $rd tests] { dict set rdst [lindex $t 0] [lindex $t 1] }
        lappend rechecks [list $k $rdst $rc [missing_why $rc -]]
    }
    set dpass 0; set dfail 0; set miss 0; set both 0; set cpass 0; set cfail 0
    array unset dst
    foreach t [dict get $d tests] {
        lassign $t key st
        set dst($key) $st
        if {![info exists cst($key)] && $st eq "ok"} {
            # Not run through cellgate: the first recheck that ran it.
            set base_name $key
            regsub { \(#\d+\)$} $key {} base_name
            if {$base_name eq $hung} {
                set why_key "hung through cellgate: no test progress for PROGRESS_TIMEOUT s (runtest --timeout)"
            } else {
                set why_key $why
            }
            foreach r $rechecks {
                lassign $r k rdst rc rwhy
                set rk [expr {$k - 1}]
                set found 0
                foreach ct [dict get $rc tests] {
                    if {[lindex $ct 0] ne $key} continue
                    if {[dict exists $rdst $key] && [dict get $rdst $key] eq "ok"} {
                        set cst($key) [lindex $ct 1]
                        set cmsg($key) "[lindex $ct 2]\n(recheck $rk, with the tests that failed or hung before it skipped)"
                        set cfrom($key) $k
                        incr recheck_found
                    } else {
                        append why_key "; in recheck $rk it fails directly too"
                    }
                    set found 1
                    break
                }
                if {$found} break
                if {$base_name eq [dict get $rc hung]} {
                    set why_key "hung through cellgate in recheck $rk: no test progress for PROGRESS_TIMEOUT s (runtest --timeout)"
                    break
                }
                if {$base_name in [dict get $rc skipped]} {
                    append why_key "; skipped in recheck $rk (a test of that name failed or hung through cellgate)"
                    break
                }
            }
        }
        set cs [expr {[info exists cst($key)] ? $cst($key) : "missing"}]
        puts $results "$unit\t$key\t$st\t$cs"
        if {$cs eq "ok"} { incr cpass } elseif {$cs eq "err"} { incr cfail }
        if {$st ne "ok"} {
            incr dfail
            if {$cs eq "ok"} { lappend only_cg [list $unit $key] }
            continue
        }
        incr dpass
        if {$cs eq "ok"} {
            incr both
            if {$cfrom($key) == 1} { incr tot_both1 }
            if {[info exists expected([expected_key $unit $key])]} {
                set expected([expected_key $unit $key]) 1
            }
            continue
        }
        if {$cs eq "missing"} {
            incr miss
            set msg $why_key
        } else {
            set msg $cmsg($key)
        }
        set ek [expected_key $unit $key]
        if {[info exists expected($ek)]} {
            lappend xfails [list $unit $key $msg]
        } else {
            lappend fails [list $unit $key $msg]
        }
    }
    # Tests the cellgate run reported and the direct run did not.
    foreach t [dict get $c tests] {
        lassign $t key st
        if {![info exists dst($key)]} {
            puts $results "$unit\t$key\tmissing\t$st"
        }
    }
    set ds [expr {[info exists secs(direct,$unit)] ? $secs(direct,$unit) : 0}]
    set cs [expr {[info exists secs(cellgate,$unit)] ? $secs(cellgate,$unit) : 0}]
    lappend rows [list $unit $dpass $dfail $ds $cpass $cfail $miss $cs]
    incr tot_dpass $dpass; incr tot_dfail $dfail
    incr tot_cpass $cpass; incr tot_cfail $cfail; incr tot_miss $miss
    incr tot_both $both
    set tot_dsecs [expr {$tot_dsecs + $ds}]
    set tot_csecs [expr {$tot_csecs + $cs}]
    if {$clean} {
        incr clean_units
        set clean_dsecs [expr {$clean_dsecs + $ds}]
        set clean_csecs [expr {$clean_csecs + $cs}]
    }
}
close $results

# ---------------------------------------------------------------- print
puts ""
puts [format "%-26s | %6s %6s %9s | %6s %6s %6s %9s | %6s" unit "direct" "" "" cellgate "" "" "" ""]
puts [format "%-26s | %6s %6s %9s | %6s %6s %6s %9s | %6s" "" pass fail seconds pass fail "not-run" seconds "time x"]
puts [string repeat - 92]
foreach r $rows {
    lassign $r unit dp df ds cp cf m cs
    set x -
    if {$ds > 0} { set x [format %.2f [expr {$cs / $ds}]] }
    puts [format "%-26s | %6d %6d %9.2f | %6d %6d %6d %9.2f | %6s" $unit $dp $df $ds $cp $cf $m $cs $x]
}
puts [string repeat - 92]
set ratio [expr {$tot_dsecs > 0 ? $tot_csecs / $tot_dsecs : 0}]
puts [format "%-26s | %6d %6d %9.2f | %6d %6d %6d %9.2f | %6.2f" total \
    $tot_dpass $tot_dfail $tot_dsecs $tot_cpass $tot_cfail $tot_miss $tot_csecs $ratio]
puts "(not-run: passes directly, never reported through cellgate)"
if {$recheck_found} {
    puts "($recheck_found outcomes through cellgate come from rechecks: tests the first round did not reach)"
}
puts ""
set pct [expr {$tot_dpass > 0 ? 100.0 * $tot_both / $tot_dpass : 0.0}]
puts [format "cellgate pass rate: %d of the %d tests that pass directly = %.2f%% (PASS_PCT %s)" \
    $tot_both $tot_dpass $pct $pass_pct]
if {$recheck_found} {
    puts [format "      (first round alone: %d = %.2f%%)" $tot_both1 \
        [expr {$tot_dpass > 0 ? 100.0 * $tot_both1 / $tot_dpass : 0.0}]]
}
puts [format "time: cellgate %.2f s / direct %.2f s = %.3f (TIME_RATIO %s)" \
    $tot_csecs $tot_dsecs $ratio $time_ratio]
if {$clean_units < [llength $units] && $clean_dsecs > 0} {
    puts [format "      (the %d units with no incident: cellgate %.2f s / direct %.2f s = %.3f)" \
        $clean_units $clean_csecs $clean_dsecs [expr {$clean_csecs / $clean_dsecs}]]
}

if {[llength $warnings]} {
    puts ""
    puts "== incidents (tests after them in that unit or block were not run)"
    foreach w $warnings { puts "  [join [split $w "\n"] "\n      "]" }
}
if {[llength $only_cg]} {
    puts ""
    puts "== fail directly but pass through cellgate ([llength $only_cg]; flaky?)"
    foreach t $only_cg { puts "  [lindex $t 0]: [lindex $t 1]" }
}

set ff [open $out/failures.txt w]
fconfigure $ff -translation lf -encoding iso8859-1
puts $ff "# Tests that pass directly against redis-server and fail through cellgate,"
puts $ff "# grouped by unit, each with the message runtest printed through cellgate."
proc list_group {chan items maxlines} {
    set prev ""
    foreach t $items {
        lassign $t unit key msg
        if {$unit ne $prev} {
            puts $chan "$unit:"
            set prev $unit
        }
        puts $chan "  - $key"
        if {$maxlines > 0 && [string trim $msg] ne ""} {
            puts $chan [indent [cut $msg $maxlines] "      "]
        }
    }
}
list_group $ff $fails 40
if {[llength $xfails]} {
    puts $ff ""
    puts $ff "# Expected failures (EXPECTED_FAIL_FILE), not counted as failures:"
    list_group $ff $xfails 40
}
close $ff

puts ""
puts "== pass directly, fail through cellgate: [llength $fails] (full messages: $out/failures.txt)"
list_group stdout $fails 3
if {[llength $xfails]} {
    puts ""
    puts "== expected failures ([llength $xfails], in $expfile; not counted as failures)"
    list_group stdout $xfails 0
}
foreach k [lsort [array names expected]] {
    if {$expected($k)} {
        lassign [split $k "\t"] u n
        puts "redis-suite: '$u: $n' passes through cellgate now: remove it from $expfile"
    }
}
puts ""
puts "redis-suite: logs in $out, every test's outcome in $out/results.tsv"
set ok 1
if {$tot_dpass == 0} {
    puts "redis-suite: FAIL: no test passed directly (is the suite running at all?)"
    set ok 0
}
if {$pct < $pass_pct} {
    puts [format "redis-suite: FAIL: pass rate %.2f%% < PASS_PCT %s" $pct $pass_pct]
    set ok 0
}
if {$ratio > $time_ratio} {
    puts [format "redis-suite: FAIL: time ratio %.3f > TIME_RATIO %s" $ratio $time_ratio]
    set ok 0
}
puts "$tot_both passed, [llength $fails] failed"
exit [expr {$ok ? 0 : 1}]

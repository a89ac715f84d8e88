#!/usr/bin/env bash
# Build every fuzz target (nightly, address sanitizer) and run each for BUDGET_SECONDS,
# one after another, on one core. Corpora live in fuzz/corpus/<target> (gitignored) and
# grow from run to run; crashing inputs land in fuzz/artifacts/<target>/.
#
#   fuzz/run.sh [BUDGET_SECONDS]      # default 60
#
# Environment:
#   TARGETS="pipeline serialize"      only these targets (default: every one)
#   SANITIZER=none                    build without the address sanitizer (faster)
#   TIMEOUT=20                        seconds one input may take before it counts as a hang
#
# Prints executions, coverage and findings per target; exits 1 when any target found a
# crash, a hang or an out-of-memory input (2 when it could not build).
set -euo pipefail

budget=${1:-60}
if ! [[ $budget =~ ^[0-9]+$ ]] || ((budget < 1)); then
    echo "usage: $0 [BUDGET_SECONDS]" >&2
    exit 2
fi
cd "$(dirname "$0")"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "run.sh: needs a nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "run.sh: installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz >&2
fi

sanitizer=${SANITIZER:-address}
targets=${TARGETS:-$(cargo +nightly fuzz list)}
timeout=${TIMEOUT:-20}
host=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_dir=target/$host/release

# Debug assertions (and so overflow checks) are on, as `cargo fuzz` does by default: an
# arithmetic overflow is a finding even where a release build would wrap silently.
if ! cargo +nightly fuzz build --sanitizer "$sanitizer" >&2; then
    echo "run.sh: build failed" >&2
    exit 2
fi

# A few deterministic seeds per empty corpus: all zeros, all ones, a byte ramp and
# pseudo-random bytes. The targets parse bytes with `arbitrary`, so any bytes are valid.
seed_corpus() {
    local dir=$1
    mkdir -p "$dir"
    if [[ -n $(ls -A "$dir") ]]; then
        return
    fi
    head -c 256 /dev/zero >"$dir/seed-zeros"
    head -c 256 /dev/zero | tr '\0' '\377' >"$dir/seed-ones"
    local ramp="" i
    for i in $(seq 0 255); do
        ramp+=$(printf '\\%03o' "$i")
    done
    printf '%b' "$ramp" >"$dir/seed-ramp"
    for i in 1 2 3 4; do
        LC_ALL=C awk -v seed="$i" \
            'BEGIN { srand(seed); for (n = 0; n < 512; n++) printf "%c", int(rand() * 256) }' \
            >"$dir/seed-random-$i"
    done
}

mkdir -p logs
failed=0
summary=()
for t in $targets; do
    seed_corpus "corpus/$t"
    mkdir -p "artifacts/$t"
    before=$(ls "artifacts/$t" | sort)
    log=logs/$t.log
    echo "== $t: ${budget}s" >&2
    # One process, one worker: libFuzzer's default (-jobs=1 would only move the output
    # into fuzz-0.log). -rss_limit_mb also caps single allocations (malloc_limit_mb).
    set +e
    "$bin_dir/$t" \
        -artifact_prefix="artifacts/$t/" \
        -max_total_time="$budget" \
        -timeout="$timeout" \
        -rss_limit_mb=2048 \
        -print_final_stats=1 \
        "corpus/$t" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    status=$(grep -E '^#[0-9]+' "$log" | tail -n1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$status")
    new=$(comm -13 <(echo "$before") <(ls "artifacts/$t" | sort) | sed '/^$/d')
    if ((rc != 0)) || [[ -n $new ]]; then
        failed=1
        result="FINDING (exit $rc)"
        grep -m1 -E "panicked at|ERROR: (AddressSanitizer|libFuzzer)" "$log" | sed 's/^/    /' >&2 || true
        grep -A1 -m1 -E "panicked at" "$log" | tail -n1 | sed 's/^/    /' >&2 || true
        for a in $new; do
            echo "    artifact: fuzz/artifacts/$t/$a" >&2
            echo "    replay:   fuzz/$bin_dir/$t fuzz/artifacts/$t/$a" >&2
            echo "    decode:   (cd fuzz && cargo +nightly fuzz fmt $t artifacts/$t/$a)" >&2
        done
        echo "    log:      fuzz/$log" >&2
    else
        result=ok
    fi
    summary+=("$(printf '%-14s %12s %7s %8s %7s  %s' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result")")
done

printf '\n%-14s %12s %7s %8s %7s  %s\n' target executions cov ft corpus result
printf '%s\n' "${summary[@]}"
exit "$failed"

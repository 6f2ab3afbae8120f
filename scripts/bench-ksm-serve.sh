#!/bin/sh
# Anchors shared across serve processes (issue #29.4): N `edgellm serve`
# processes of one model, each sent one completion whose prompt is the same
# long system prompt (the first ANCHORS positions: --anchors) followed by a
# question of its own, run once without and once with --share-anchors. For
# each run KSM is switched on after every server has answered, and the
# script reports the rise of /sys/kernel/mm/ksm/pages_sharing, each
# process's PSS (Pss_Anon + Pss_Shmem of /proc/PID/smaps_rollup) and the
# PSS of its mergeable mappings (VmFlags "mg": the anchor pages) before and
# after, and the CPU ksmd spent (utime+stime of /proc/PID/stat, ticks of
# 1/100 s). KSM is global: every knob is saved and restored; the script
# needs root and a writable /sys/kernel/mm/ksm (it says so and exits 0
# otherwise). Other processes advising memory mergeable at the same time
# move pages_sharing too.
#
# Usage: scripts/bench-ksm-serve.sh BIN MODEL [N [ANCHORS [WINDOW [CTX [COPIES [MODES]]]]]]
#   defaults: N 8, ANCHORS 512, WINDOW 64, CTX 1024, COPIES 1, MODES "off on"
#   EDGELLM_SHARED must be set: the system prompt is COPIES copies of
#   text/stories.txt (about 730 tokens on stories260K's vocabulary, 400 on
#   a 32k one); it must hold at least ANCHORS tokens (checked).
set -eu
BIN=$1
MODEL=$2
N=${3:-8}
ANCHORS=${4:-512}
WINDOW=${5:-64}
CTX=${6:-1024}
COPIES=${7:-1}
MODES=${8:-"off on"}
KSM=/sys/kernel/mm/ksm
TEXT="${EDGELLM_SHARED:?set EDGELLM_SHARED}/text/stories.txt"

if [ ! -w "$KSM/run" ]; then
	echo "bench-ksm-serve: $KSM/run is not writable (needs root and KSM in the kernel): skipped"
	exit 0
fi
DIR=$(mktemp -d "${TMPDIR:-/tmp}/edgellm-ksm-XXXXXX")
PIDS=""
saved=""
for k in run pages_to_scan sleep_millisecs smart_scan; do
	[ -f "$KSM/$k" ] && saved="$saved $k=$(cat "$KSM/$k")"
done
# stop_servers ends the servers started here: SIGTERM, then SIGKILL for
# one still in a long prefill after 10 s (serve finishes its step first).
stop_servers() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for _ in $(seq 1 100); do
		alive=""
		for p in $PIDS; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
		[ -z "$alive" ] && break
		sleep 0.1
	done
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	PIDS=""
}
restore() {
	stop_servers
	echo 0 >"$KSM/run"
	for kv in $saved; do
		[ "${kv%%=*}" = run ] || echo "${kv#*=}" >"$KSM/${kv%%=*}"
	done
	for kv in $saved; do
		[ "${kv%%=*}" = run ] && echo "${kv#*=}" >"$KSM/run"
	done
	rm -rf "$DIR"
}
trap restore EXIT
trap 'exit 130' INT TERM
echo 0 >"$KSM/run"
echo 5000 >"$KSM/pages_to_scan"
echo 5 >"$KSM/sleep_millisecs"
[ -f "$KSM/smart_scan" ] && echo 0 >"$KSM/smart_scan"

ksmd_ticks() {
	p=$(pgrep -x ksmd | head -1)
	[ -n "$p" ] || { echo -1; return; }
	sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'
}
own_pss() { # kB: Pss_Anon + Pss_Shmem
	awk '/^Pss_Anon:|^Pss_Shmem:/ {s += $2} END {print s}' "/proc/$1/smaps_rollup"
}
mg_kb() { # "RSS PSS" kB of the mappings advised mergeable
	awk '/^[0-9a-f]+-[0-9a-f]+ / {r = 0; p = 0; next}
		/^Rss:/ {r = $2} /^Pss:/ {p = $2}
		/^VmFlags:/ && / mg( |$)/ {R += r; P += p}
		END {print R + 0, P + 0}' "/proc/$1/smaps"
}
json_str() { # a JSON string literal of stdin
	sed 's/\\/\\\\/g; s/"/\\"/g' | awk 'BEGIN {printf "\""} {printf "%s\\n", $0} END {printf "\""}'
}

sys=""
for _ in $(seq 1 "$COPIES"); do sys="$sys$(cat "$TEXT")
"; done

for mode in $MODES; do
	flag=""
	[ "$mode" = on ] && flag="--share-anchors"
	echo 0 >"$KSM/run"
	PIDS=""
	i=0
	while [ "$i" -lt "$N" ]; do
		"$BIN" serve -m "$MODEL" --engine native --threads 1 --ctx "$CTX" --kv-type f16 \
			--window "$WINDOW" --anchors "$ANCHORS" $flag --request-timeout 60m --addr 127.0.0.1:0 2>"$DIR/serve$i.log" &
		PIDS="$PIDS $!"
		i=$((i + 1))
	done
	i=0
	CURLS=""
	for p in $PIDS; do
		url=""
		for _ in $(seq 1 1200); do # up to 2 minutes to load and listen
			url=$(sed -n 's/.*serving on \(http:[^ ]*\).*/\1/p' "$DIR/serve$i.log" | head -1)
			[ -n "$url" ] && break
			kill -0 "$p" 2>/dev/null || { cat "$DIR/serve$i.log" >&2; exit 1; }
			sleep 0.1
		done
		[ -n "$url" ] || { echo "serve $i did not listen" >&2; cat "$DIR/serve$i.log" >&2; exit 1; }
		# The requests run at once, one per server (their prefills share
		# the cores, as 8 users' would).
		printf '%s\nQuestion %d: what did the child in story %d do next?\n' "$sys" "$i" "$i" | json_str >"$DIR/prompt$i"
		curl -s -o "$DIR/resp$i.json" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
			-d "{\"prompt\":$(cat "$DIR/prompt$i"),\"temperature\":0,\"max_tokens\":8}" >"$DIR/code$i" &
		CURLS="$CURLS $!"
		i=$((i + 1))
	done
	for c in $CURLS; do wait "$c" || true; done
	i=0
	while [ "$i" -lt "$N" ]; do
		code=$(cat "$DIR/code$i")
		[ "$code" = 200 ] || { echo "serve $i: completion: HTTP $code: $(cat "$DIR/resp$i.json")" >&2; exit 1; }
		i=$((i + 1))
	done
	ptoks=$(sed -n 's/.*"prompt_tokens":\([0-9]*\).*/\1/p' "$DIR/resp0.json")
	[ "$ptoks" -gt "$ANCHORS" ] || { echo "the prompt has $ptoks tokens, not more than --anchors $ANCHORS: raise COPIES" >&2; exit 1; }
	# Let each server's Go heap settle; then "without KSM" readings.
	sleep 1
	before=""
	mg0=0
	mgp0=0
	for p in $PIDS; do
		set -- $(mg_kb "$p")
		mg0=$((mg0 + $1))
		mgp0=$((mgp0 + $2))
		before="$before $(own_pss "$p")"
	done
	# KSM is global: another process may have switched it on meanwhile.
	[ "$(cat "$KSM/run")" = 0 ] && [ "$mgp0" -ge "$mg0" ] ||
		echo "note: KSM was switched on by another process during the prompts (run=$(cat "$KSM/run"), mergeable PSS $mgp0 < RSS $mg0 kB): part merged before the 'before' readings"
	base=$(cat "$KSM/pages_sharing")
	scans0=$(cat "$KSM/full_scans")
	t0=$(ksmd_ticks)
	start=$(date +%s.%N)
	maxstall=2400 # 2 minutes without a full scan
	[ "$mg0" -eq 0 ] && maxstall=200 # nothing of ours to scan: 10 s
	echo 1 >"$KSM/run"
	# Poll until pages_sharing has not moved over 2 full scans after it last
	# rose (a page merges on the second scan that finds it unchanged), at
	# most 20 full scans or 2 minutes without a scan (ksmd does not scan
	# when no process has mergeable memory).
	last=$base
	lastscan=$scans0
	prevfs=$scans0
	stall=0
	while :; do
		sleep 0.05
		cur=$(cat "$KSM/pages_sharing")
		fs=$(cat "$KSM/full_scans")
		if [ "$cur" != "$last" ]; then
			last=$cur
			lastscan=$fs
		fi
		[ $((fs - lastscan)) -ge 2 ] && [ $((fs - scans0)) -ge 2 ] && break
		[ $((fs - scans0)) -ge 20 ] && break
		if [ "$fs" != "$prevfs" ]; then
			prevfs=$fs
			stall=0
		else
			stall=$((stall + 1))
		fi
		[ "$stall" -ge "$maxstall" ] && { echo "(ksmd completed no full scan in $((maxstall / 20)) s)"; break; }
	done
	[ "$(cat "$KSM/run")" = 1 ] || echo "note: KSM was switched off by another process during the wait"
	wall=$(awk "BEGIN {printf \"%.2f\", $(date +%s.%N) - $start}")
	t1=$(ksmd_ticks)
	scans=$(($(cat "$KSM/full_scans") - scans0))
	after=""
	merged=""
	mg1=0
	mgp1=0
	for p in $PIDS; do
		set -- $(mg_kb "$p")
		mg1=$((mg1 + $1))
		mgp1=$((mgp1 + $2))
		after="$after $(own_pss "$p")"
		merged="$merged $(cat "/proc/$p/ksm_merging_pages" 2>/dev/null || echo -)"
	done
	rise=$(($(cat "$KSM/pages_sharing") - base))
	sum0=0
	for v in $before; do sum0=$((sum0 + v)); done
	sum1=0
	for v in $after; do sum1=$((sum1 + v)); done
	echo "== share-anchors $mode: $N serve processes, $(basename "$MODEL"), prompt $ptoks tokens, anchors $ANCHORS, window $WINDOW, ctx $CTX, F16 KV"
	echo "mergeable mappings: RSS $mg0 kB, PSS $mgp0 → $mgp1 kB (summed over the processes)"
	echo "pages_sharing rise: $rise (machine-wide; after $scans full scans, ${wall}s)"
	echo "merged pages per process (/proc/PID/ksm_merging_pages):$merged"
	echo "process PSS (anon+shmem) kB before:$before"
	echo "process PSS (anon+shmem) kB after: $after"
	echo "process PSS sum: $sum0 → $sum1 kB ($((sum1 - sum0)))"
	echo "ksmd CPU: $((t1 - t0)) ticks (1/100 s)"
	echo 0 >"$KSM/run"
	stop_servers
done

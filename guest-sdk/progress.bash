# What both build tools (js/componentize, python/componentize) say while they work: stage
# lines on stderr (and in the build's log, `$log`), and a line every 30 s while a long step
# runs. Sourced, not run.

# A stage line on stderr (and in the log): what a step that takes more than a few seconds
# does, and about how long it takes.
notice() { echo "componentize: $*" >&2; echo "componentize: $*" >>"$log"; }

# `3 min 20 s`, `40 s`: a duration in seconds as people read it.
duration() {
  if (($1 < 60)); then echo "$1 s"; elif (($1 % 60 == 0)); then echo "$(($1 / 60)) min"; else echo "$(($1 / 60)) min $(($1 % 60)) s"; fi
}

# Runs CMD...; while it runs, says every 30 s that it is still WHAT. (The ticker stops when
# the tool is gone; neither it nor its sleep holds the tool's locks (fds 7-9) or output open.)
ticking() { # WHAT CMD...
  local what="$1" from=$SECONDS ticker status=0 parent=$$
  shift
  (
    while sleep 30 </dev/null >/dev/null 2>&1 && kill -0 "$parent" 2>/dev/null; do
      echo "componentize: still $what ($(duration $((SECONDS - from))) so far)" >&2
    done
  ) 7>&- 8>&- 9>&- >/dev/null &
  ticker=$!
  "$@" || status=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$status"
}

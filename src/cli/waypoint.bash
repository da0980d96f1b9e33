#!/usr/bin/env bash
# The `waypoint` command on Linux and macOS (dist/waypoint; `node dist/cli.js` is the same
# command anywhere).
#
# Every command runs Node (dist/cli.js), except `waypoint checkpoint` beside a store owner
# that serves: that one is relayed here, in bash, with one loopback HTTP call. Agents and
# scripts without an editor checkpoint around their tool calls, a background owner that
# watches the tree answers one in milliseconds, and Node's own start (~50-120 ms before a
# line of ours runs) would be most of each call; git's fsmonitor hook answers with a tiny
# client for the same reason. Like the Node fast path (src/cli/checkpointFastPath.ts) this
# path can only decline: anything unusual — another argument, no serving owner, an owner
# that does not answer its probe, an answer of another shape, a refusal — goes to Node,
# which words every error as it always has. A call that may have reached the owner is handed
# to Node with its idempotency key, so it is answered from the record, never done twice.

# Patterns below (journal-+([0-9]).wal) are parsed with extglob; an unmatched glob is empty.
shopt -s extglob nullglob

wp_here=${BASH_SOURCE[0]}
[[ $wp_here == */* ]] || wp_here=./$wp_here
# npm links the command into a bin folder: find the real file, and dist/cli.js beside it.
while [[ -L $wp_here ]]; do
  wp_link=$(readlink -- "$wp_here") || break
  [[ $wp_link == /* ]] || wp_link=${wp_here%/*}/$wp_link
  wp_here=$wp_link
done
wp_cli=${wp_here%/*}/cli.js

# Set by wp_fast_checkpoint when it declines after the call may have reached the owner.
wp_key=

# The store folder a command started here works on, found as findWorkspace (storeDirOf.ts)
# finds it: the nearest folder holding a Waypoint store, else the git repository's root,
# else the start folder. Physical paths, as Node's process.cwd() gives them.
wp_holds_store() {
  local d=$1/.waypoint
  [[ -d $d && ! -L $d ]] || return 1
  local m
  for m in waypoint.db identity.json workspace-id.json link.json owner.lock; do
    [[ -e $d/$m || -L $d/$m ]] && return 0
  done
  local j=("$d"/journal-+([0-9]).wal)
  ((${#j[@]} > 0))
}

# Sets workspace (no subshell: every fork is a millisecond of the call).
wp_find_workspace() {
  local from=$1 dir=$1
  while :; do
    if wp_holds_store "$dir" || [[ -e $dir/.git ]]; then
      workspace=$dir
      return
    fi
    [[ $dir == / ]] && break
    dir=${dir%/*}
    [[ -z $dir ]] && dir=/
  done
  workspace=$from
}

# A small regular file's text (the discovery and identity files), or failure.
wp_read_file() {
  local f=$1
  [[ -f $f && ! -L $f && -r $f ]] || return 1
  # At most one byte past the bound is read: a huge file is refused, not loaded.
  IFS= read -r -N 65537 wp_text <"$f"
  [[ -n $wp_text && ${#wp_text} -le 65536 ]]
}

# One HTTP/1.0 POST to the owner; sets wp_status and wp_body. Fails on a transport error
# or when no whole answer came within $3 seconds.
wp_post() {
  local body=$1 timeout=$2 resp rc
  { exec 3<>"/dev/tcp/127.0.0.1/$wp_port"; } 2>/dev/null || return 1
  printf 'POST /rpc HTTP/1.0\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\nx-waypoint-store: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    "$wp_port" "$wp_token" "$wp_claim" "${#body}" "$body" >&3 2>/dev/null || {
    exec 3>&-
    return 1
  }
  # The owner closes the connection after its answer (HTTP/1.0): read to the end.
  IFS= read -r -d '' -t "$timeout" resp <&3
  rc=$?
  exec 3>&-
  # 1 is the end of the stream (there is no NUL in an answer); anything else is a timeout or an error.
  ((rc == 1)) || return 1
  [[ $resp =~ ^HTTP/1\.[01]\ ([0-9]{3})\  ]] || return 1
  wp_status=${BASH_REMATCH[1]}
  [[ $resp == *$'\r\n\r\n'* ]] || return 1
  wp_body=${resp#*$'\r\n\r\n'}
}

# Sets variable $1 to the JSON string text of $2, printable ASCII (the caller declines
# anything else). printf -v, not $(...): no subshell.
wp_json_str() {
  local s=${2//\\/\\\\}
  printf -v "$1" '"%s"' "${s//\"/\\\"}"
}

# 0: answered (printed); 1: declined, nothing reached an owner or it refused; 2: declined
# after the call may have reached the owner (wp_key holds its idempotency key).
wp_fast_checkpoint() {
  # Bytes, not characters: lengths, patterns and [[:print:]] below are about bytes.
  local LC_ALL=C
  [[ $1 == checkpoint ]] || return 1
  shift
  [[ -z ${WAYPOINT_STORE//[[:space:]]/} ]] || return 1
  local task='' label='' key='' workspace='' json=0 have_label=0 have_key=0 have_ws=0 a flag value
  while (($#)); do
    a=$1
    shift
    if [[ $a == --json ]]; then
      json=1
      continue
    fi
    if [[ $a == --*=* ]]; then
      flag=${a%%=*}
      value=${a#*=}
    else
      flag=$a
      (($#)) || return 1
      value=$1
      shift
      # A value that looks like a flag is Node's to word as a usage error.
      [[ $value == -* ]] && return 1
    fi
    case $flag in
    --task | -t)
      [[ -z $task ]] || return 1
      task=$value
      ;;
    --label)
      ((have_label == 0)) || return 1
      have_label=1
      label=$value
      ;;
    --key)
      ((have_key == 0)) || return 1
      have_key=1
      key=$value
      ;;
    --workspace | -w)
      ((have_ws == 0)) || return 1
      have_ws=1
      workspace=$value
      ;;
    *) return 1 ;;
    esac
  done
  [[ -n $task && $task != *[!A-Za-z0-9_.:-]* && ${#task} -le 200 ]] || return 1
  # Only plain text goes through here: anything else is Node's to encode.
  # (Globs and lengths, not a bounded regex: glibc compiles `{0,4000}` into a huge automaton.)
  [[ $label == *[![:print:]]* || $key == *[![:print:]]* ]] && return 1
  ((${#label} <= 4000 && ${#key} <= 400)) || return 1
  local cwd
  cwd=$(pwd -P 2>/dev/null) || return 1
  [[ $cwd == /* ]] || return 1
  if ((have_ws)); then
    # Node resolves the path by its text; with no `..` in it the file system agrees.
    [[ -n $workspace && /$workspace/ != */../* ]] || return 1
    [[ $workspace == /* ]] || workspace=$cwd/$workspace
    [[ -d $workspace ]] || return 1
  else
    wp_find_workspace "$cwd"
  fi
  local store=$workspace/.waypoint
  [[ -d $store && ! -L $store ]] || return 1
  # A folder of a multi-root window: Node follows the link.
  [[ -e $store/link.json || -L $store/link.json ]] && return 1
  local wp_text disc
  wp_read_file "$store/mcp.json" || return 1
  disc=$wp_text
  [[ $wp_text =~ \"url\":\ ?\"http://127\.0\.0\.1:([1-9][0-9]{0,4})/mcp\" ]] || return 1
  local wp_port=${BASH_REMATCH[1]}
  ((wp_port <= 65535)) || return 1
  [[ $wp_text =~ \"token\":\ ?\"([A-Za-z0-9_-]+)\" ]] || return 1
  local wp_token=${BASH_REMATCH[1]}
  ((${#wp_token} >= 32 && ${#wp_token} <= 256)) || return 1
  # The claim names this very folder (device and inode of its store, and its recorded id):
  # the owner of the folder this one was copied from refuses a call from the copy.
  local id=- fp
  fp=$(stat -c '%d:%i' -- "$store" 2>/dev/null || stat -f '%d:%i' -- "$store" 2>/dev/null) || return 1
  [[ $fp =~ ^[0-9]+:[0-9]+$ && ${#fp} -le 49 ]] || return 1
  if [[ -e $store/identity.json || -L $store/identity.json ]]; then
    wp_read_file "$store/identity.json" || return 1
    [[ $wp_text =~ \"id\":\ ?\"([A-Za-z0-9_-]+)\" ]] || return 1
    id=${BASH_REMATCH[1]}
    ((${#id} >= 8 && ${#id} <= 64)) || return 1
  fi
  # The discovery file names the store its owner serves, and the owner's pid: a copy of the
  # folder (another inode) or an owner that is gone is Node's to sort out, before any call.
  [[ $disc =~ \"pid\":\ ?([1-9][0-9]*) ]] || return 1
  local pid=${BASH_REMATCH[1]}
  ((${#pid} <= 9)) && kill -0 "$pid" 2>/dev/null || return 1
  [[ $disc =~ \"dev\":\ ?\"([0-9]+)\",[[:space:]]*\"ino\":\ ?\"([0-9]+)\" ]] || return 1
  [[ ${BASH_REMATCH[1]}:${BASH_REMATCH[2]} == "$fp" ]] || return 1
  local wp_claim=$id:$fp
  local timeout=120
  if [[ -n ${WAYPOINT_RPC_TIMEOUT-} ]]; then
    [[ $WAYPOINT_RPC_TIMEOUT =~ ^[0-9]{1,5}$ ]] && ((10#$WAYPOINT_RPC_TIMEOUT >= 1 && 10#$WAYPOINT_RPC_TIMEOUT <= 86400)) || return 1
    timeout=$((10#$WAYPOINT_RPC_TIMEOUT))
  fi
  local wp_status wp_body
  # The cheap question first: an owner that is stopped or stalled is found out in 2 s.
  wp_post '{"method":"info"}' 2 || return 1
  [[ $wp_status == 200 && $wp_body == '{"ok":true,'* ]] || return 1
  if ((have_key == 0)); then
    local uuid
    { IFS= read -r uuid </proc/sys/kernel/random/uuid; } 2>/dev/null || uuid=$(uuidgen 2>/dev/null) || return 1
    [[ $uuid =~ ^[0-9A-Fa-f-]{36}$ ]] || return 1
    key=checkpoint:$uuid
  fi
  local jtask jlabel jkey arg
  wp_json_str jtask "$task"
  wp_json_str jlabel "$label"
  wp_json_str jkey "$key"
  arg="{\"taskId\":$jtask"
  ((have_label)) && arg+=",\"label\":$jlabel"
  arg+=",\"idempotencyKey\":$jkey}"
  ((have_key)) || wp_key=$key
  wp_post "{\"method\":\"checkpoint\",\"arg\":$arg}" "$timeout" || return 2
  # The one plain answer; any other (a refusal, a warning about files not captured) is Node's to word.
  [[ $wp_status == 200 && $wp_body =~ ^\{\"ok\":true,\"result\":\{\"taskId\":\"([A-Za-z0-9_.:-]+)\",\"checkpointId\":\"([A-Za-z0-9_-]+)\",\"filesChanged\":(0|[1-9][0-9]*)\}\}$ && ${#BASH_REMATCH[3]} -le 15 ]] || return 2
  local rtask=${BASH_REMATCH[1]} cp=${BASH_REMATCH[2]} n=${BASH_REMATCH[3]}
  if ((json)); then
    printf '{\n  "taskId": "%s",\n  "checkpointId": "%s",\n  "filesChanged": %s\n}\n' "$rtask" "$cp" "$n"
  elif ((n == 1)); then
    printf 'Checkpoint %s (1 file changed)\n' "$cp"
  else
    printf 'Checkpoint %s (%s files changed)\n' "$cp" "$n"
  fi
}

# A command that does its work and ends runs with V8's young generation capped at 1 MB
# (the default lets it grow to 16 MB a half): a first checkpoint of 51,000 files with no
# owner allocates a manifest's worth of short-lived objects, and the larger young
# generation only holds more of them at once. Measured (npm run bench -- --only=background,
# docs/benchmarks-history.md): peak RSS ~184 -> ~159 MB, and no slower. The commands that
# stay up (serve, mcp) keep V8's default; the background owner is started with it too.
wp_node=(node)
case ${1-} in
serve | mcp | background-owner) ;;
*) wp_node+=(--max-semi-space-size=1) ;;
esac

if [[ ${1-} == checkpoint && -z ${WAYPOINT_NO_FAST_PATH-} ]]; then
  wp_fast_checkpoint "$@"
  case $? in
  0) exit 0 ;;
  2)
    # Delivered or not, Node repeats the call under the same key: answered from the record if it was done.
    [[ -n $wp_key ]] && exec "${wp_node[@]}" "$wp_cli" "$@" --key "$wp_key"
    ;;
  esac
fi
exec "${wp_node[@]}" "$wp_cli" "$@"

# One virsh shell per vmmd for the virsh tests (sourced by lib.sh; uses its $dir): stock virsh at
# its 'virsh #' prompt, fed through a pipe as a person types into it. In the nested VM each virsh
# process takes ~0.8 s to start and connect, and the virsh tests make 20 to 90 calls each: 69 s of
# one test's 92 s went to starting 85 of them.
#   vsh_open NAME URI     start NAME's shell on URI (in the test's own shell, not in a $(...))
#   vsh_call NAME URI ARGS...
#                         virsh ARGS on NAME's shell: its output (stderr with it) and a status
#                         that is virsh's (1 when the command printed an 'error:' line)
#   vsh_close NAME        end it
# A call that may run beside another (migrate, event, qemu-monitor-event: tests send them to the
# background), one made while another holds the shell, one whose argument a prompt's line cannot
# carry (a newline), and any once the shell has gone, run a virsh of their own as before.
declare -A vsh_w=() vsh_r=() vsh_pid=()

vsh_open() {
    local w r
    vsh_close "$1"
    rm -f "$dir/vsh-$1.in" "$dir/vsh-$1.out"
    mkfifo "$dir/vsh-$1.in" "$dir/vsh-$1.out" || return 0  # calls then run virsh each
    TERM=dumb INPUTRC=/dev/null XDG_CACHE_HOME="$dir/vsh-cache" \
        virsh -c "$2" <"$dir/vsh-$1.in" >"$dir/vsh-$1.out" 2>&1 &
    vsh_pid[$1]=$!
    exec {w}>"$dir/vsh-$1.in" {r}<"$dir/vsh-$1.out"
    vsh_w[$1]=$w
    vsh_r[$1]=$r
    vsh_exchange "$1" >/dev/null || vsh_close "$1"  # past the welcome text
}

vsh_close() {
    [ -n "${vsh_pid[$1]:-}" ] || return 0
    kill "${vsh_pid[$1]}" 2>/dev/null
    wait "${vsh_pid[$1]}" 2>/dev/null
    exec {vsh_w[$1]}>&- {vsh_r[$1]}<&-
    unset "vsh_pid[$1]" "vsh_w[$1]" "vsh_r[$1]"
}

# vsh_quote ARGS...: the arguments as one line of virsh's shell (single quotes, each ' written '\'').
vsh_quote() {
    local a q=
    for a; do q+=" '${a//\'/\'\\\'\'}'"; done
    printf '%s' "${q# }"
}

# vsh_exchange NAME [LINE]: send LINE (none: only the markers) between two markers and print what
# virsh wrote between them, but for what the shell says of its connection (a vmmd gone away, the
# reconnect after it): that is not the command's. Status 0, 1 when an 'error:' line came, 2 when
# nothing could be sent, 3 when the shell ended before its answer.
vsh_exchange() {
    local m="__vsh_${BASHPID}_${EPOCHREALTIME/./}" line began= rc=0
    # A subshell: a shell that died as we write ends it with SIGPIPE, not the test.
    (printf 'echo %s_begin\n%s\necho %s_end\n\n' "$m" "${2:-}" "$m" >&"${vsh_w[$1]}") 2>/dev/null || return 2
    while IFS= read -r line <&"${vsh_r[$1]}"; do
        # The prompt and the input it echoes are not output; an output whose last line has no
        # newline runs into the next prompt: keep what came before it.
        case "$line" in *"virsh # "*)
            line=${line%%virsh # *}
            [ -n "$line" ] || continue ;;
        esac
        if [ -z "$began" ]; then
            [[ "$line" == "${m}_begin"* ]] && began=1
            continue  # before it: an earlier call's leftovers
        fi
        case "$line" in
        "${m}_end"*) return "$rc" ;;
        "error: Disconnected from "*" due to "* | "Reconnected to the hypervisor"*) continue ;;
        "error: "*) rc=1 ;;
        esac
        printf '%s\n' "$line"
    done
    echo "error: the virsh shell ended before it answered"
    return 3
}

vsh_call() {
    local name=$1 uri=$2 a lock rc
    shift 2
    case "${1:-}" in migrate | event | qemu-monitor-event) virsh -c "$uri" "$@" 2>&1; return ;; esac
    for a; do [[ "$a" == *$'\n'* ]] && { virsh -c "$uri" "$@" 2>&1; return; }; done
    if [ -z "${vsh_pid[$name]:-}" ] || ! kill -0 "${vsh_pid[$name]}" 2>/dev/null ||
        ! exec {lock}>"$dir/vsh-$name.lock"; then
        virsh -c "$uri" "$@" 2>&1
        return
    fi
    if ! flock -n "$lock"; then  # a job beside us has the shell
        exec {lock}>&-
        virsh -c "$uri" "$@" 2>&1
        return
    fi
    vsh_exchange "$name" "$(vsh_quote "$@")"
    rc=$?
    exec {lock}>&-
    [ "$rc" != 2 ] || { virsh -c "$uri" "$@" 2>&1; return; }
    [ "$rc" = 0 ]
}

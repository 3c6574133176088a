# Sourced by the scripts here. `read_options "mib rounds" "$@"` reads the
# leading `--name VALUE` options into NAME (upper case, `-` as `_`), for
# the names listed only, and leaves the rest of the arguments in ARGV.
read_options() {
    local allowed=" $1 " name
    shift
    while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do
        name=${1#--}
        case $allowed in
            *" $name "*) ;;
            *) echo "unknown option $1" >&2; exit 2 ;;
        esac
        [ $# -ge 2 ] || { echo "$1 needs a value" >&2; exit 2; }
        printf -v "$(echo "$name" | tr 'a-z-' 'A-Z_')" '%s' "$2"
        shift 2
    done
    ARGV=("$@")
}

# `enter_scratch NAME`: makes a scratch folder in /dev/shm, enters it (W
# names it) and, when the script ends, stops the processes in PIDS and
# removes the folder.
enter_scratch() {
    W=$(mktemp -d "/dev/shm/braid-$1.XXXXXX")
    PIDS=()
    trap 'kill "${PIDS[@]}" 2> /dev/null || true; rm -rf "$W"' EXIT
    cd "$W"
}

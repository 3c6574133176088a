# Sourced by the scripts here: `read_options "mib rounds" "$@"` reads the
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

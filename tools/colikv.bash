# bash completion for colikv: commands, their options, and a store's
# conversation ids. Installed by `cmake --install` as
# share/bash-completion/completions/colikv, where bash-completion loads it.
#
# The names come from the tool itself (colikv help --commands, colikv help
# --options COMMAND: the tables its --help is made of), so this file never
# lists them and cannot fall behind; ids from `colikv ls STORE --ids`.

_colikv() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  local tool=${COMP_WORDS[0]}
  COMPREPLY=()

  if ((COMP_CWORD == 1)); then
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W '--help --version' -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$("$tool" help --commands 2>/dev/null) help" -- "$cur"))
    fi
    return 0
  fi

  local cmd=${COMP_WORDS[1]}
  if [[ $cmd == help ]]; then
    ((COMP_CWORD == 2)) && COMPREPLY=($(compgen -W "$("$tool" help --commands 2>/dev/null)" -- "$cur"))
    return 0
  fi

  # Positional arguments: which one is being typed (options and their values
  # skipped), and the store named first.
  local i word n=0 store= tenant=
  local takes_value=" --sync --max-bytes --max-idle --at --limit --tokens --busy-timeout --file-mode --id --tenant --to-tenant --grant --revoke --weights-id --model-of --weights-id-from "
  for ((i = 2; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    [[ $word == --tenant ]] && tenant=${COMP_WORDS[i + 1]}
    if [[ $word == -* ]]; then
      [[ $takes_value == *" $word "* ]] && ((i++))
      continue
    fi
    ((n == 0)) && store=$word
    ((n++))
  done

  # What is typed: an option's value, an option, a file, or an id of the store.
  local want=none
  case $prev in
    --sync) COMPREPLY=($(compgen -W 'normal full' -- "$cur")); return 0 ;;
    --model-of) want=id ;;
    --tokens|--weights-id-from) [[ $cmd == match || $prev == --weights-id-from ]] && want=file ;;
    --max-bytes|--max-idle|--at|--limit|--busy-timeout|--file-mode|--id|--tenant|--to-tenant|--grant|--revoke|--weights-id)
      return 0 ;;
    *)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$("$tool" help --options "$cmd" 2>/dev/null)" -- "$cur"))
        return 0
      fi
      case $cmd:$n in
        inspect:0|import:1|export:2|*:0) want=file ;;
        export:1|info:1|verify:1|rename:1|fork:1|truncate:1|rm:*) want=id ;;
        copy:*) ((n >= 2)) && want=id ;;
      esac
      ;;
  esac

  if [[ $want == file ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  elif [[ $want == id && -n $store ]]; then
    # The store's conversation ids, most recently used first. A store that
    # cannot be read completes nothing, and says nothing.
    local ids
    if [[ -n $tenant ]]; then
      ids=$("$tool" ls "$store" --ids --tenant "$tenant" 2>/dev/null)
    else
      ids=$("$tool" ls "$store" --ids 2>/dev/null)
    fi
    # Not compgen -W: it would expand a $(...) or a `...` inside an id, and
    # ids are whatever the store holds. Each is offered quoted for the shell
    # (printf %q), and matched as typed so far in that form.
    local id quoted
    while IFS= read -r id; do
      [[ -n $id ]] || continue
      printf -v quoted '%q' "$id"
      [[ $quoted == "$cur"* || $id == "$cur"* ]] && COMPREPLY+=("$quoted")
    done <<<"$ids"
  fi
  return 0
}
complete -o default -F _colikv colikv

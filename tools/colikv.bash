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

  # An option's value: what it takes, where that can be listed.
  case $prev in
    --sync) COMPREPLY=($(compgen -W 'normal full' -- "$cur")); return 0 ;;
    --max-bytes|--max-idle|--at|--limit|--tokens|--busy-timeout|--file-mode|--id|--tenant|--to-tenant|--grant|--revoke|--weights-id)
      return 0 ;;
    --model-of|--weights-id-from)
      COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
  esac

  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$("$tool" help --options "$cmd" 2>/dev/null)" -- "$cur"))
    return 0
  fi

  # Positional arguments: which one is being typed (options and their values skipped).
  local i word n=0 store= tenant=
  local takes_value=" --sync --max-bytes --max-idle --at --limit --tokens --busy-timeout --file-mode --id --tenant --to-tenant --grant --revoke --weights-id --model-of --weights-id-from "
  for ((i = 2; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word == --tenant ]]; then
      tenant=${COMP_WORDS[i + 1]}
    fi
    if [[ $word == -* ]]; then
      [[ $takes_value == *" $word "* ]] && ((i++))
      continue
    fi
    ((n == 0)) && store=$word
    ((n++))
  done

  case $cmd in
    import|export|inspect|copy|ls|stats|vacuum|gc|tenants|tenant)
      # Files (a store, a .coli_kv file), but never ids.
      ((n == 0)) || [[ $cmd == import || $cmd == inspect || $cmd == export ]] && COMPREPLY=($(compgen -f -- "$cur"))
      ;;
    *)
      if ((n == 0)); then
        COMPREPLY=($(compgen -f -- "$cur"))
      elif [[ -n $store ]]; then
        # The store's conversation ids (rm takes several). A store that cannot
        # be read completes nothing, and says nothing.
        local ids
        if [[ -n $tenant ]]; then
          ids=$("$tool" ls "$store" --ids --tenant "$tenant" 2>/dev/null)
        else
          ids=$("$tool" ls "$store" --ids 2>/dev/null)
        fi
        local IFS=$'\n'
        COMPREPLY=($(compgen -W "$ids" -- "$cur"))
      fi
      ;;
  esac
  return 0
}
complete -o default -F _colikv colikv

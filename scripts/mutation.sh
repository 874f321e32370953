#!/usr/bin/env bash
# Mutation testing of the selection, pipeline, index, budget and verification modules; a script
# outside CI (hours on two cores), its scores are in docs/testing.md. mutmut copies meteora_edge/
# into mutants/, mutates the modules [tool.mutmut] in pyproject.toml lists and runs the fast tier
# of the tests listed there against each mutant (only those that reach the mutated function,
# quickest first): one worker, nice 10. Results stay in mutants/, so a run that stops resumes,
# and a function that changed since is tested again.
#
#   scripts/mutation.sh                           every mutant not judged yet, then the table
#   scripts/mutation.sh MODULE...                 every mutant of these modules, again
#                                                 (MODULE: selection.stages or meteora_edge/pipeline/budget.py)
#   scripts/mutation.sh --survivors [MODULE...]   only the mutants not killed yet (after adding tests)
#
# After a change to a module's code, run the module again (or, once every module has run, the
# script without arguments: mutmut then tests the functions that changed).
#   scripts/mutation.sh --sample N                at most N not-run mutants per module, drawn at random
#                                                 (seed 17): when a whole run does not fit the time there is
#   scripts/mutation.sh --table                   the table only
#   MUTATION_CHILDREN=2 scripts/mutation.sh       more workers, on a machine of your own
set -euo pipefail
cd "$(dirname "$0")/.."
if ! .venv/bin/python -c "import mutmut" 2>/dev/null; then
    echo 'Error: mutmut is not installed; run: .venv/bin/pip install -c requirements/constraints.txt -e ".[mutation]"' >&2
    exit 2
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 METEORA_EDGE_OFFLINE_TESTS=1

survivors=0
sample=
case "${1:-}" in
    --table) exec .venv/bin/python scripts/mutation_table.py ;;
    --sample)
        [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "Error: --sample needs a positive count" >&2; exit 2; }
        sample=$2; shift 2 ;;
    --survivors) survivors=1; shift ;;
    -*) echo "Error: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
esac

patterns=()
for module in "$@"; do
    dotted=${module%.py}
    dotted=${dotted//\//.}
    dotted=meteora_edge.${dotted#meteora_edge.}
    if [ ! -f "${dotted//.//}.py" ]; then
        echo "Error: no module $module (${dotted//.//}.py); name one of [tool.mutmut] only_mutate" >&2
        exit 2
    fi
    patterns+=("$dotted.*")
done

names=()
if [ -n "$sample" ]; then
    mapfile -t names < <(.venv/bin/python scripts/mutation_table.py --sample "$sample")
    if [ ${#names[@]} = 0 ]; then
        echo "no mutants left to run"
        exec .venv/bin/python scripts/mutation_table.py
    fi
elif [ "$survivors" = 1 ]; then
    while IFS= read -r name; do
        if [ ${#patterns[@]} = 0 ]; then names+=("$name"); continue; fi
        for pattern in "${patterns[@]}"; do
            # shellcheck disable=SC2053  # the pattern is a glob on purpose
            if [[ $name == $pattern ]]; then names+=("$name"); fi
        done
    done < <(.venv/bin/python scripts/mutation_table.py --survivors)
    if [ ${#names[@]} = 0 ]; then
        echo "no survivors to run again"
        exec .venv/bin/python scripts/mutation_table.py
    fi
else
    names=(${patterns[@]+"${patterns[@]}"})
fi

rm -rf mutants/tests  # mutmut copies tests/ over the old copy: start clean so deleted tests go too
nice -n 10 .venv/bin/mutmut run --max-children "${MUTATION_CHILDREN:-1}" ${names[@]+"${names[@]}"}
.venv/bin/python scripts/mutation_table.py

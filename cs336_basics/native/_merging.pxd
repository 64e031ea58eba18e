# How a binding runs the C++ merge loop: argument checks, the GIL released, progress relayed, merges
# back as bytes. _merge_cpp's two entry points (word counts in a dict, and word counts held in C++)
# share it.
cimport cs336_basics.native._libbpe as lib
from cs336_basics.native._progress cimport ProgressRelay, flush_progress, relay_progress, start_relay
from libcpp.vector cimport vector

# Take the GIL for the Python progress callable at most once per this many merges: each merge takes
# microseconds, and a GIL round trip plus a tqdm update costs about as much.
cdef enum:
    PROGRESS_EVERY_MERGES = 100


cdef inline size_t size_or_default(object value, str name, size_t default) except? 0:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer or None, got {value!r}")
    return value


# The C++ loop's value for a tie-break row (tie_break.TieBreak): its name's place in the C++'s own
# list; a row the C++ does not have is refused in one line.
cdef inline lib.TieBreak tie_break_rule(object row) except *:
    names = [name.decode() for name in lib.tie_break_names()]
    if not row.native or row.name not in names:
        raise ValueError(
            f"tie_break {row.name!r} has no rule in the C++ merge loop (it has {', '.join(names)}): train with "
            "bpe_v1 ... bpe_v5, or add it to cpp/merge/bpe_merge.hpp (docs/RULES.md, 'Adding a tie-break')"
        )
    return <lib.TieBreak><int>names.index(row.name)


# A base's merges (start_from.py) as the ids the loop gives their tokens, in `tokens` as bytes.
cdef inline vector[lib.Merge] base_merge_ids(object base_merges, list tokens) except *:
    cdef vector[lib.Merge] replay
    cdef lib.Merge merge
    ids = {token: token_id for token_id, token in enumerate(tokens)}
    for left, right in base_merges:
        if left not in ids or right not in ids:
            raise ValueError(f"the base merge ({left!r}, {right!r}) joins a token no earlier merge makes")
        merge.left = ids[left]
        merge.right = ids[right]
        replay.push_back(merge)
        ids.setdefault(left + right, len(tokens))
        tokens.append(left + right)
    return replay


# release_words: `words` is emptied, its memory freed, once the merge loop has loaded them.
# rules: a phases.MergeRules, read once here: its tie-break row, the limits (merge_limits.py, on the
# new merges only) and a base's merges, which each word starts encoded by (bpe_merge.hpp, `replay`);
# only the new merges come back.
cdef inline list train_merges(
    lib.CountedWords& words, object num_merges, object progress, int num_threads, object prune_pairs,
    object parallel_words, bint release_words, object rules,
):
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative integer, got {num_merges!r}")
    cdef size_t prune_limit = size_or_default(prune_pairs, "prune_pairs", lib.kDefaultPrunePairs)
    cdef size_t parallel_limit = size_or_default(parallel_words, "parallel_words", lib.kDefaultParallelWords)
    from ..phases import check_merge_rules

    rules = check_merge_rules(rules)
    cdef lib.TieBreak rule = tie_break_rule(rules.tie_break)
    cdef lib.MergeLimits limits
    limits.min_frequency = rules.limits.min_frequency
    limits.max_token_length = rules.limits.native_max_token_length
    limits.max_words = rules.limits.native_max_words
    limits.no_colon_space = rules.limits.no_colon_space
    errors = []
    cdef ProgressRelay relay
    start_relay(&relay, progress, errors, PROGRESS_EVERY_MERGES)
    cdef lib.MergeProgress callback = NULL
    if progress is not None:
        callback = relay_progress
    cdef size_t wanted = num_merges
    cdef list tokens = [bytes((byte,)) for byte in range(256)]
    cdef vector[lib.Merge] replay = base_merge_ids(rules.base_merges, tokens)
    cdef vector[lib.Merge] merges
    with nogil:
        if release_words:
            merges = lib.train_merges_releasing_words(
                words, wanted, callback, &relay, num_threads, prune_limit, parallel_limit, rule, replay,
                limits,
            )
        else:
            merges = lib.train_merges(
                words, wanted, callback, &relay, num_threads, prune_limit, parallel_limit, rule, replay,
                limits,
            )
    flush_progress(&relay, merges.size())
    if errors:
        raise errors[0]
    return spelled(merges, tokens)


# The merges as bytes, spelled from their ids: each token is made once and the merges share it, so
# the tokens of one long word (megabytes each) are held once, not once per merge that names them.
# `tokens`: the bytes of the tokens before the first merge (the 256 bytes, and a base's tokens).
cdef inline list spelled(const vector[lib.Merge]& merges, list tokens):
    cdef list result = []
    cdef size_t index
    for index in range(merges.size()):
        left = tokens[merges[index].left]
        right = tokens[merges[index].right]
        result.append((left, right))
        tokens.append(left + right)
    return result

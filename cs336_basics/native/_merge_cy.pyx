# cython: language_level=3, annotation_typing=False
"""bpe_v5's merge loop: bpe_v4's algorithm compiled by Cython, on C++ containers.

`PairIndex` follows `bpe_v2.PairIndex` and `PairHeap` follows `bpe_v4.PairHeap` step by step. Only the
data changes: a token is a C int, a pair is one 64-bit key `left << 32 | right`, counts are int64, and
the dicts, sets and lists become unordered_map and vector, so the loop runs without Python objects.
"""

from collections.abc import Callable, Mapping
from operator import index as as_integer

from ..phases import check_merge_rules
from ..rules.start_from import replay_ids

from cython.operator cimport dereference as deref
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libcpp.string cimport npos, string
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

# Call the Python progress callable once per this many merges (each merge takes microseconds).
cdef size_t PROGRESS_EVERY = 100
# Rebuild the heap once it holds this many times more entries than there are live pairs (as bpe_v4).
cdef size_t COMPACTION_FACTOR = 2
cdef size_t COMPACTION_SLACK = 1024

ctypedef uint64_t Pair  # left << 32 | right


cdef inline Pair make_pair(int32_t left, int32_t right) noexcept nogil:
    return (<uint64_t>left << 32) | <uint32_t>right


cdef inline int32_t left_of(Pair pair) noexcept nogil:
    return <int32_t>(pair >> 32)


cdef inline int32_t right_of(Pair pair) noexcept nogil:
    return <int32_t><uint32_t>pair


cdef void merge_word(const vector[int32_t]& word, Pair pair, int32_t new_token, vector[int32_t]& merged):
    """vocab_layout.merge_word: replace every non-overlapping occurrence of `pair`, left to right."""
    cdef int32_t left = left_of(pair), right = right_of(pair)
    cdef size_t index = 0, length = word.size()
    merged.clear()
    while index < length:
        if index + 1 < length and word[index] == left and word[index + 1] == right:
            merged.push_back(new_token)
            index += 2
        else:
            merged.push_back(word[index])
            index += 1


cdef class PairIndex:
    """Words as token ids, their pair counts, and the inverted index pair -> word indices."""

    cdef vector[string] token_bytes
    cdef vector[vector[int32_t]] words
    cdef vector[int64_t] counts
    cdef unordered_map[Pair, int64_t] pair_counts
    # May list words that no longer hold the pair; merging them changes nothing, so they are skipped.
    cdef unordered_map[Pair, vector[int32_t]] words_with
    # The net change of each pair's count in the last merge (bpe_v2 returns the set of these pairs).
    cdef unordered_map[Pair, int64_t] changed
    # The limits on a merged token (merge_limits.py), set by limit_tokens: a pair refused is never counted.
    cdef bint limited  # whether any is set: else every pair is allowed, unchecked
    cdef size_t max_token_length  # 0 for none
    cdef size_t max_words  # 0 for none
    cdef bint no_colon_space
    # Under max_words or no_colon_space, each token's words (merge_limits.count_words) and whether it
    # holds b": ", so a pair's are known from its tokens' without reading their bytes.
    cdef vector[uint64_t] token_words
    cdef vector[char] token_colon_space

    def __cinit__(self, word_counts: Mapping[bytes, int]) -> None:
        cdef const unsigned char* data
        cdef Py_ssize_t length, at
        cdef int64_t count
        cdef vector[int32_t] word
        cdef int32_t index
        cdef Pair pair
        for byte in range(256):
            self.token_bytes.push_back(bytes((byte,)))
        for key, value in word_counts.items():
            if not isinstance(key, bytes):
                raise TypeError(f"word counts must map bytes to int; got the key {key!r}")
            try:
                count = as_integer(value)
            except OverflowError:
                raise OverflowError(f"the count of {key!r} does not fit in 64 bits: {value}") from None
            if count < 0:
                raise ValueError(f"word counts must not be negative; {key!r} has {count}")
            length = len(key)
            if count == 0 or length < 2:  # no pair to count
                continue
            data = key
            word.clear()
            for at in range(length):
                word.push_back(data[at])
            index = <int32_t>self.words.size()
            self.words.push_back(word)
            self.counts.push_back(count)
            for at in range(length - 1):
                pair = make_pair(word[at], word[at + 1])
                self.pair_counts[pair] += count
                self.add_word_to(pair, index)

    cdef inline bint allows(self, Pair pair) noexcept:
        """merge_limits.MergeLimits.allows for the pair's token."""
        if not self.limited:
            return True
        cdef int32_t left = left_of(pair), right = right_of(pair)
        cdef size_t length = self.token_bytes[left].size() + self.token_bytes[right].size()
        if self.max_token_length != 0 and length != 2 and length >= self.max_token_length:
            return False
        if self.token_words.empty():  # max_token_length alone
            return True
        # Tokens are never empty; where they meet, the last word of left and the first of right are one.
        cdef char last = self.token_bytes[left].back(), first = self.token_bytes[right].front()
        if self.no_colon_space and (
            self.token_colon_space[left] or self.token_colon_space[right] or (last == b':' and first == b' ')
        ):
            return False
        cdef uint64_t words = self.token_words[left] + self.token_words[right] - (last != b' ' and first != b' ')
        return self.max_words == 0 or words <= self.max_words

    cdef void add_token_shape(self, int32_t token):
        """`token`'s words and whether it holds b": ", from its bytes (a token made before the limits)."""
        cdef string* data = &self.token_bytes[token]
        cdef uint64_t words = 0
        cdef size_t at
        for at in range(data.size()):
            if deref(data)[at] != b' ' and (at == 0 or deref(data)[at - 1] == b' '):
                words += 1
        cdef char colon_space = data.find(b": ") != npos
        self.token_words.push_back(words)
        self.token_colon_space.push_back(colon_space)

    cdef void join_token_shapes(self, int32_t left, int32_t right):
        """The shape of the token `left + right` from its parts' (as allows reads them)."""
        cdef char last = self.token_bytes[left].back(), first = self.token_bytes[right].front()
        cdef uint64_t words = self.token_words[left] + self.token_words[right] - (last != b' ' and first != b' ')
        cdef char colon_space = (
            self.token_colon_space[left] or self.token_colon_space[right] or (last == b':' and first == b' ')
        )
        self.token_words.push_back(words)
        self.token_colon_space.push_back(colon_space)

    cdef void limit_tokens(self, object limits):
        """From now on a pair whose token a limit refuses is never counted: those counted so far are
        dropped (after a base's merges are replayed, which make any token)."""
        cdef int32_t token
        self.max_token_length = limits.native_max_token_length
        self.max_words = limits.native_max_words
        self.no_colon_space = limits.no_colon_space
        self.limited = self.max_token_length != 0 or self.max_words != 0 or self.no_colon_space
        if not self.limited:
            return
        if self.max_words != 0 or self.no_colon_space:
            for token in range(<int32_t>self.token_bytes.size()):
                self.add_token_shape(token)
        cdef vector[Pair] refused
        for counted in self.pair_counts:
            if not self.allows(counted.first):
                refused.push_back(counted.first)
        for pair in refused:
            self.pair_counts.erase(pair)
            self.words_with.erase(pair)

    cdef inline void add_word_to(self, Pair pair, int32_t index):
        cdef vector[int32_t]* listed = &self.words_with[pair]
        # A word is listed only while it is being processed, so if it is listed already it is last.
        if listed.empty() or listed.back() != index:
            listed.push_back(index)

    cdef void apply_merge(self, Pair pair):
        """Apply one merge; `changed` then holds the pairs whose counts changed, with by how much."""
        cdef int32_t new_token = <int32_t>self.token_bytes.size()
        cdef vector[int32_t] touched, merged
        cdef vector[int32_t]* old
        cdef int32_t index
        cdef int64_t count
        cdef size_t at
        self.token_bytes.push_back(self.token_bytes[left_of(pair)] + self.token_bytes[right_of(pair)])
        if not self.token_words.empty():
            self.join_token_shapes(left_of(pair), right_of(pair))
        self.changed.clear()
        touched.swap(self.words_with[pair])
        self.words_with.erase(pair)
        for index in touched:
            old = &self.words[index]
            merge_word(deref(old), pair, new_token, merged)
            if merged.size() == old.size():
                continue
            count = self.counts[index]
            for at in range(old.size() - 1):
                self.changed[make_pair(deref(old)[at], deref(old)[at + 1])] -= count
            for at in range(merged.size() - 1):
                if not self.allows(make_pair(merged[at], merged[at + 1])):
                    continue
                self.changed[make_pair(merged[at], merged[at + 1])] += count
                # Unlike bpe_v2's sets, only list the word under pairs it did not have before, which
                # are exactly those with the new token: its other pairs already list it.
                if merged[at] == new_token or merged[at + 1] == new_token:
                    self.add_word_to(make_pair(merged[at], merged[at + 1]), index)
            old.swap(merged)
        for change in self.changed:
            if change.second == 0:
                continue
            self.pair_counts[change.first] += change.second
            if self.pair_counts[change.first] <= 0:
                self.pair_counts.erase(change.first)


cdef struct HeapEntry:
    int64_t count  # the pair's count when pushed; stale once the pair's count differs
    Pair pair


cdef class PairHeap:
    """Max-heap of pairs in the CS336 order, or a rule by id, with lazy deletion and compaction
    (bpe_v4.PairHeap).

    heapq is a min-heap over Python tuples, so bpe_v4 negates counts and complements bytes; here the
    heap is written out with the order itself, `ranks_above`.
    """

    cdef PairIndex index
    cdef vector[HeapEntry] heap
    # A rule by rank (tie_break.TieBreak.rank): each byte's rank, a merged token's being its id;
    # empty for a rule by bytes (cs336).
    cdef vector[int32_t] byte_ranks

    def __cinit__(self, PairIndex index, object tie_break) -> None:
        self.index = index
        if tie_break.byte_ranks is not None:
            for rank in tie_break.byte_ranks:
                self.byte_ranks.push_back(rank)
        self.rebuild()

    cdef inline int32_t rank(self, int32_t token) noexcept:
        return self.byte_ranks[token] if token < 256 else token

    cdef bint ranks_above(self, const HeapEntry& x, const HeapEntry& y) noexcept:
        """The CS336 order: the higher count first; ties go to the lexicographically greatest
        (left_bytes, right_bytes), compared as Python compares a tuple of two bytes objects.
        std::string::compare compares as unsigned char, and a proper prefix sorts first, as bytes do.
        A rule by id gives ties to the smallest (left rank, right rank) instead.
        """
        if x.count != y.count:
            return x.count > y.count
        if not self.byte_ranks.empty():  # by id: the smallest (left rank, right rank)
            if left_of(x.pair) != left_of(y.pair):
                return self.rank(left_of(x.pair)) < self.rank(left_of(y.pair))
            return self.rank(right_of(x.pair)) < self.rank(right_of(y.pair))
        cdef vector[string]* tokens = &self.index.token_bytes
        cdef int order = deref(tokens)[left_of(x.pair)].compare(deref(tokens)[left_of(y.pair)])
        if order != 0:
            return order > 0
        return deref(tokens)[right_of(x.pair)].compare(deref(tokens)[right_of(y.pair)]) > 0

    cdef void sift_up(self, size_t position) noexcept:
        cdef HeapEntry entry = self.heap[position]
        cdef size_t parent
        while position > 0:
            parent = (position - 1) // 2
            if not self.ranks_above(entry, self.heap[parent]):
                break
            self.heap[position] = self.heap[parent]
            position = parent
        self.heap[position] = entry

    cdef void sift_down(self, size_t position) noexcept:
        cdef HeapEntry entry = self.heap[position]
        cdef size_t size = self.heap.size(), child
        while 2 * position + 1 < size:
            child = 2 * position + 1
            if child + 1 < size and self.ranks_above(self.heap[child + 1], self.heap[child]):
                child += 1
            if not self.ranks_above(self.heap[child], entry):
                break
            self.heap[position] = self.heap[child]
            position = child
        self.heap[position] = entry

    cdef void push(self, Pair pair, int64_t count):
        self.heap.push_back(HeapEntry(count, pair))
        self.sift_up(self.heap.size() - 1)

    cdef void pop(self) noexcept:
        self.heap[0] = self.heap.back()
        self.heap.pop_back()
        if not self.heap.empty():
            self.sift_down(0)

    cdef void rebuild(self):
        cdef size_t position
        self.heap.clear()
        for item in self.index.pair_counts:
            self.heap.push_back(HeapEntry(item.second, item.first))
        for position in reversed(range(self.heap.size() // 2)):
            self.sift_down(position)

    cdef bint pop_best(self, Pair* best) noexcept:
        """The best live pair into `best`; False when no pair is left. Stale entries are dropped."""
        cdef unordered_map[Pair, int64_t].iterator found
        while not self.heap.empty():
            found = self.index.pair_counts.find(self.heap[0].pair)
            if found != self.index.pair_counts.end() and deref(found).second == self.heap[0].count:
                best[0] = self.heap[0].pair
                return True
            self.pop()
        return False

    cdef void update(self):
        """Push a fresh entry for every pair whose count changed in the last merge and still lives."""
        cdef unordered_map[Pair, int64_t].iterator found
        for change in self.index.changed:
            if change.second == 0:
                continue
            found = self.index.pair_counts.find(change.first)
            if found != self.index.pair_counts.end():
                self.push(change.first, deref(found).second)
        if self.heap.size() > COMPACTION_FACTOR * self.index.pair_counts.size() + COMPACTION_SLACK:
            self.rebuild()


def merge(
    word_counts: Mapping[bytes, int],
    num_merges: int,
    progress: Callable[[int], None] | None = None,
    *,
    rules: object = None,
) -> list[tuple[bytes, bytes]]:
    """Up to `num_merges` merges as `[(left_bytes, right_bytes), ...]`, in creation order.

    `word_counts` maps each pre-token's UTF-8 bytes to how often it occurs (words seen 0 times are
    ignored). `progress`, if given, is called now and then with the number of merges done since its
    previous call, so `tqdm.update` fits; the sum of its arguments is the number of merges returned.
    `rules`: a `phases.MergeRules` (None: the defaults): which pair wins among equal counts (any row
    of `tie_break.py`), a base's merges, replayed first whatever their counts (`start_from.py`; only
    the merges after them come back), and HF's limits (`merge_limits.py`) on those.
    """
    if isinstance(num_merges, bool) or not isinstance(num_merges, int) or num_merges < 0:
        raise ValueError(f"num_merges must be a non-negative integer, got {num_merges!r}")
    rules = check_merge_rules(rules)
    limits = rules.limits
    cdef int64_t least_count = limits.min_frequency
    cdef PairIndex index = PairIndex(word_counts)
    for left, right in replay_ids(rules.base_merges):  # each word becomes its encoding by the base
        index.apply_merge(make_pair(left, right))
    index.limit_tokens(limits)
    cdef PairHeap heap = PairHeap(index, rules.tie_break)
    cdef Pair best
    cdef size_t wanted = num_merges, done = 0, reported = 0
    merges = []
    while done < wanted and heap.pop_best(&best):
        if index.pair_counts[best] < least_count:
            break
        merges.append((index.token_bytes[left_of(best)], index.token_bytes[right_of(best)]))
        index.apply_merge(best)
        heap.update()
        done += 1
        if progress is not None and done - reported >= PROGRESS_EVERY:
            progress(done - reported)
            reported = done
    if progress is not None and done > reported:
        progress(done - reported)
    return merges

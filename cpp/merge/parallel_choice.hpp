// When a merge runs on the threads: timed, merge by merge, against one thread.
// Part of bpe_merge.cpp, its only includer: an unnamed namespace, as the loop was in one file.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kit/omp_shim.hpp"

namespace bpe {
namespace {

// Decides, merge by merge, whether the threads rewrite the words and apply the changes: only
// merges that touch at least `min_words` words (0: every merge, for tests), and only while timing
// shows the threads no slower per word. On a busy machine a parallel merge waits for a descheduled
// thread at every join and was measured up to 30 times slower per word than one thread
// (docs/PERFORMANCE.md). Now and then a run of eligible merges takes the other path, to notice
// when the load changes: ever more rarely while the same path wins (the interval doubles, up to
// kExploreAtMost), as one thread on a large merge costs milliseconds where many cores are idle.
// Merges are timed in bands of size (min_words times 1, 4, 16, 64, 256 and more), as the fixed
// cost of the threads weighs more on small merges; a band takes one thread without exploring while
// the threads lose in a larger band. A parallel merge takes every thread. The merges do not depend on
// the choice.
// Above the bands, a watch on the cores: a team that did not get its cores while it counted the
// initial pairs (observe_team), or a parallel merge that stalled (slower than one thread would be,
// by a margin no idle machine shows), sends every merge to one thread; after a cooldown of wall
// time one merge probes the threads again, and the cooldown doubles while the probes stall. Beside
// one CPU-bound loop on two cores each stall costs a scheduler's time slice, milliseconds, so the
// watch acts on the first one (docs/PERFORMANCE.md).
class ParallelChoice {
public:
    // glance: before a probe, ask the kernel whether the machine has idle cores (idle_cores_for).
    ParallelChoice(size_t threads, size_t min_words, bool glance = true)
        : threads_(threads),
          min_words_(min_words),
          clear_win_(std::min(kClearWin, kClearWinPerThread * double(threads))),
          glance_(glance) {}

    // The team's process CPU seconds over `wall_seconds` of a phase that kept its `team` threads
    // busy: a share of the cores below kGotCores starts the merges on one thread, and the smaller
    // the share, the later the first probe (a probe's stall is longer on a busier machine).
    void observe_team(double cpu_seconds, double wall_seconds, size_t team, double now) {
        if (threads_ <= 1 || min_words_ == 0 || team <= 1 || cpu_seconds < 0 || wall_seconds < kLeastObserved) return;
        const double share = cpu_seconds / (double(team) * wall_seconds);
        if (share >= kGotCores) return;
        starve(now, 0);
        resume_at_ = now + std::min(kCooldown / std::max(share, 0.01), kLongestCooldown);
    }

    // Whether every merge goes to one thread for now.
    bool starved() const { return starved_; }

    // Whether a merge of `num_words` runs on the threads; `now` in seconds, any origin.
    bool parallel(size_t num_words, double now) {
        if (threads_ <= 1) return false;
        if (min_words_ == 0) return true;
        if (num_words < min_words_) return false;
        const size_t index = band_index(num_words);
        if (starved_) {
            // One thread, timed as in use, so that the probe is judged against today's cost.
            bands_[index].timing = Timing::kInUse;
            if (now < resume_at_) return false;
            // While no core is idle a probe would stall: it waits longer instead, unpaid, until
            // the cooldown is at its longest (the count is the whole machine's, and of an instant).
            if (glance_ && cooldown_ < kLongestCooldown && idle_cores_for(threads_ - 1) == 0) {
                cooldown_ = std::min(2 * cooldown_, kLongestCooldown);
                resume_at_ = now + cooldown_;
                return false;
            }
            probing_ = true;
            return true;
        }
        ++eligible_;
        // Threads that lose on larger merges lose on these: no exploring (costly on a busy machine),
        // while that verdict is fresh. Merges shrink as training goes on, so a larger band may see
        // no merge again: a stale verdict kept the 1,024-4,095-word merges on one thread for good
        // (on 16 cores, 2.0 s where the threads take 1.07 s).
        for (size_t larger = index + 1; larger < kBands; ++larger) {
            if (bands_[larger].threads_lose() && eligible_ - bands_[larger].last_eligible < kFreshFor) {
                bands_[index].timing = Timing::kSkipped;
                return false;
            }
        }
        Band& band = bands_[index];
        band.last_eligible = eligible_;
        const bool threads = !band.threads_lose();
        if (band.explore_left == 0 && ++band.eligible >= band.next_exploration) {
            // A choice that changed since the last exploration starts the interval again.
            if (threads != band.threads_chosen) band.explore_interval = kExploreEvery;
            band.threads_chosen = threads;
            band.explore_interval = std::min(2 * band.explore_interval, kExploreAtMost);
            band.next_exploration = band.eligible + band.explore_interval;
            // Threads in use are timed at every merge, so a load that slows them shows without
            // exploring: one thread is timed again only once they are no longer clearly faster
            // (on 16 cores, runs of one thread on merges where the threads were 8-12 times faster
            // had cost a tenth of the merge phase).
            if (!threads || band.serial_cost < 0 || clear_win_ * band.parallel_cost > band.serial_cost) {
                band.explore_left = kExploreRun;
            }
        }
        if (band.explore_left > 0) {
            // The first merge of a run finds the words in the caches the other path left them in.
            band.timing = band.explore_left-- == kExploreRun ? Timing::kSkipped : Timing::kExplored;
            return !band.threads_chosen;
        }
        band.timing = Timing::kInUse;
        return threads;
    }

    // Seconds per word of an eligible merge, averaged over the last few merges of each path; a
    // parallel merge is first judged by the watch (`now`: when it ended).
    void record(bool parallel, size_t num_words, double seconds, double now) {
        if (min_words_ == 0 || num_words < min_words_ || threads_ <= 1) return;
        const size_t index = band_index(num_words);
        Band& band = bands_[index];
        if (parallel) {
            ++use_.parallel_merges;
            const double lost = stall(index, num_words, seconds);
            const bool stalled = lost > 0;
            if (probing_) {
                probing_ = false;
                if (stalled) {
                    cooldown_ = std::min(2 * cooldown_, kLongestCooldown);
                    starve(now, lost);
                    return;
                }
                starved_ = false;
                cooldown_ = kCooldown;
                ++use_.resumed;
                band.timing = Timing::kSkipped;  // its words were in one core's cache
            } else if (stalled) {
                // One stall alone is a hiccup (an idle virtual machine shows a few a run); a load
                // stalls merge after merge.
                if (++stalls_in_a_row_ >= kStallsInARow) starve(now, lost);
                return;  // the load's cost, not the threads': their band keeps its timing
            }
            stalls_in_a_row_ = 0;
        }
        if (band.timing == Timing::kSkipped) return;
        double& cost = parallel ? band.parallel_cost : band.serial_cost;
        const double sample = seconds / double(num_words);
        // An explored path's cost is stale (its last samples may be hundreds of merges old), so its
        // new samples weigh more. A sample raises the cost by at most kMostRise times its weight: one
        // merge that waited on a descheduled thread (135 against 25 ns a word) had turned a band to
        // one thread for good, where merges took 81 ns a word against the threads' 54.
        if (cost < 0) {
            cost = sample;
        } else {
            cost += (std::min(sample, kMostRise * cost) - cost) / (band.timing == Timing::kExplored ? 3 : 8);
        }
    }

    // What the watch did so far (MergeThreadUse, bpe_merge.hpp).
    struct Use {
        size_t parallel_merges = 0;
        size_t starved = 0;
        size_t resumed = 0;
    };
    const Use& use() const { return use_; }

private:
    // A team that got less than this share of its cores did not have them: on two cores beside one
    // CPU-bound loop it gets two thirds; idle, 0.9 and more (docs/PERFORMANCE.md).
    static constexpr double kGotCores = 0.8;
    static constexpr double kLeastObserved = 0.005;  // shorter phases say too little
    // A parallel merge stalled when it took kStallRatio times what one thread would and kStallFloor
    // seconds more: a descheduled thread costs a time slice, a millisecond or more.
    static constexpr double kStallRatio = 1.5;
    static constexpr double kStallFloor = 500e-6;
    // Parallel merges that stall one after another before every merge goes to one thread: on an
    // idle 2-core virtual machine single stalls sent a third of real_mix -> 10K's merges to one
    // thread for 30 times the time they lost (1.17-1.22x the merge phase of one that ignored them).
    static constexpr size_t kStallsInARow = 2;
    // One thread's seconds per word where no merge was timed on it yet: several times any measured
    // (40-160 ns a word), so only a stall exceeds it.
    static constexpr double kPriorSerialCost = 1e-6;
    static constexpr double kCooldown = 0.05;        // seconds on one thread before the first probe
    static constexpr double kLongestCooldown = 1.0;  // at most, under a lasting load, unless:
    // A probe follows a stall after this many times the seconds it lost, so that probing costs a few
    // percent at most: beside seven jobs on two cores a stall lost 25 ms.
    static constexpr double kCooldownPerLost = 32;

    void starve(double now, double lost) {
        stalls_in_a_row_ = 0;
        if (!starved_) ++use_.starved;
        starved_ = true;
        probing_ = false;
        resume_at_ = now + std::max(cooldown_, kCooldownPerLost * lost);
    }

    // The seconds a parallel merge lost to a stall, 0 when it took not clearly longer than one
    // thread would: the band's own serial cost, else the nearest band's (a smaller band's costs more
    // a word), else the prior.
    double stall(size_t index, size_t num_words, double seconds) const {
        double cost = -1;
        for (size_t distance = 0; cost < 0 && distance < kBands; ++distance) {
            if (index + distance < kBands && bands_[index + distance].serial_cost >= 0) {
                cost = bands_[index + distance].serial_cost;
            } else if (distance <= index && bands_[index - distance].serial_cost >= 0) {
                cost = bands_[index - distance].serial_cost;
            }
        }
        const double serial = double(num_words) * (cost < 0 ? kPriorSerialCost : cost);
        return seconds > kStallRatio * serial && seconds - serial > kStallFloor ? seconds - serial : 0;
    }

    static constexpr size_t kExploreEvery = 16;
    static constexpr size_t kExploreAtMost = 1024;
    // Merges in a run of the other path, the first untimed: a lone merge on the other path was
    // timed in the caches the other path had left (a parallel merge's words in every core's cache,
    // a lone one thread's in one), and came out up to twice as slow as a run of it.
    static constexpr size_t kExploreRun = 4;
    static constexpr double kMostRise = 2;
    // Threads this many times faster than one are not timed against it again (below: exploring).
    // Two threads seldom reach 2x, so they count as a clear win at 1.5x: at 2x they kept exploring,
    // a large merge on one thread now and then, to learn what was known (docs/PERFORMANCE.md).
    static constexpr double kClearWin = 2;
    static constexpr double kClearWinPerThread = 0.75;
    static constexpr size_t kBands = 5;
    // A band's verdict holds for smaller merges until this many eligible merges have passed it.
    static constexpr size_t kFreshFor = 64;
    enum class Timing { kInUse, kExplored, kSkipped };
    struct Band {
        size_t eligible = 0;       // eligible merges outside exploring runs
        size_t last_eligible = 0;  // eligible_ at the band's last merge
        size_t next_exploration = kExploreEvery;
        size_t explore_interval = kExploreEvery / 2;
        size_t explore_left = 0;  // merges left in the exploring run
        // Unknown until measured: the threads first, then a run of one thread after kExploreEvery.
        double parallel_cost = -1;
        double serial_cost = -1;
        bool threads_chosen = true;  // at the last exploration
        Timing timing = Timing::kInUse;  // how the band's merge now running is timed

        bool threads_lose() const { return serial_cost >= 0 && parallel_cost > serial_cost; }
    };

    size_t band_index(size_t num_words) const {
        size_t band = 0;
        for (size_t bound = 4 * min_words_; band + 1 < kBands && num_words >= bound; bound *= 4) ++band;
        return band;
    }

    size_t threads_;
    size_t min_words_;
    double clear_win_;  // kClearWin, lower for two threads
    size_t eligible_ = 0;  // merges of min_words or more so far, in every band
    Band bands_[kBands];
    bool starved_ = false;  // every merge on one thread until resume_at_, then a probe
    size_t stalls_in_a_row_ = 0;
    bool probing_ = false;  // the merge now running probes the threads
    double resume_at_ = 0;
    double cooldown_ = kCooldown;
    bool glance_;
    Use use_;
};

// The choice's clock: steady_clock, or for tests (simulate_busy_machine, bpe_merge.hpp) a simulated
// one, on which a merge takes a microsecond a word on one thread and half that on the threads, but
// each of the first `stalls` parallel merges a millisecond more than 1.5 times one thread's time, as
// if another job had held a core.
class MergeClock {
public:
    explicit MergeClock(size_t stalls) : simulated_(stalls != 0), stalls_left_(stalls) {}

    bool simulated() const { return simulated_; }

    double now() const {
        if (simulated_) return simulated_now_;
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    }

    // The seconds a merge took, given what steady_clock measured.
    double took(bool parallel, size_t num_words, double measured) {
        if (!simulated_) return measured;
        double seconds = double(num_words) * (parallel ? 0.5e-6 : 1e-6);
        if (parallel && stalls_left_ > 0) {
            --stalls_left_;
            seconds = 3 * seconds + 1e-3;
        }
        simulated_now_ += seconds;
        return seconds;
    }

private:
    bool simulated_;
    size_t stalls_left_;
    double simulated_now_ = 0;
    std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace
}  // namespace bpe

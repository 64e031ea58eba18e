// A fixed-size, zero-filled array of trivial values that asks for transparent huge pages when it is
// big: visited at random, a large table costs a TLB miss (a page walk) per visit on 4 KiB pages.
// The counter's word table and the merge loop's word arena live in one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

#if !defined(_WIN32)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace bpe {

template <typename Value>
class HugePageArray {
    static_assert(std::is_trivially_copyable<Value>::value, "the array is zero-filled memory, not constructed");

public:
    HugePageArray() = default;
    explicit HugePageArray(size_t count) : count_(count) {
        if (count == 0) return;
#if defined(MADV_HUGEPAGE)
        const size_t bytes = count * sizeof(Value);
        if (bytes >= kHugePageBytes) {
            // Over-allocate by a huge page so that the values can start on a huge-page boundary.
            mapped_bytes_ = bytes + kHugePageBytes;
            void* mapped =
                ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (mapped == MAP_FAILED) throw std::bad_alloc();
            mapped_ = mapped;
            const uintptr_t aligned =
                (uintptr_t(mapped) + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
            ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // a hint only
            values_ = reinterpret_cast<Value*>(aligned);
            return;
        }
#endif
        values_ = static_cast<Value*>(std::calloc(count, sizeof(Value)));
        if (values_ == nullptr) throw std::bad_alloc();
    }
    HugePageArray(HugePageArray&& other) noexcept { swap(other); }
    HugePageArray& operator=(HugePageArray&& other) noexcept {
        swap(other);
        return *this;
    }
    HugePageArray(const HugePageArray&) = delete;
    HugePageArray& operator=(const HugePageArray&) = delete;
    ~HugePageArray() {
#if defined(MADV_HUGEPAGE)
        if (mapped_ != nullptr) {
            ::munmap(mapped_, mapped_bytes_);
            return;
        }
#endif
        std::free(values_);
    }

    Value* data() { return values_; }
    const Value* data() const { return values_; }
    Value& operator[](size_t index) { return values_[index]; }
    const Value& operator[](size_t index) const { return values_[index]; }
    size_t size() const { return count_; }

    // Gives the whole pages within [begin, end), a part of this array, back to the system: they
    // read as zeros if touched again. Only a mapped (large) array has pages of its own to give.
    void release(const void* begin, const void* end) {
#if defined(MADV_HUGEPAGE)
        if (mapped_ == nullptr) return;
        const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
        const uintptr_t from = (uintptr_t(begin) + page - 1) & ~(page - 1);
        const uintptr_t to = uintptr_t(end) & ~(page - 1);
        if (from < to) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
#else
        (void)begin;
        (void)end;
#endif
    }

private:
    static constexpr size_t kHugePageBytes = size_t(2) << 20;

    void swap(HugePageArray& other) noexcept {
        std::swap(values_, other.values_);
        std::swap(count_, other.count_);
        std::swap(mapped_, other.mapped_);
        std::swap(mapped_bytes_, other.mapped_bytes_);
    }

    Value* values_ = nullptr;
    size_t count_ = 0;
    void* mapped_ = nullptr;
    size_t mapped_bytes_ = 0;
};

}  // namespace bpe

// A whole file as read-only memory: memory-mapped where possible, so a 12 GB corpus costs no heap.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ios>
#include <mutex>
#include <string>
#include <string_view>

#if defined(_WIN32)
#include <fstream>
#include <iterator>
#else
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace bpe {

// A file error: std::ios_base::failure (OSError in Python) with exactly the message given, where
// libstdc++'s own what() appends ": iostream error".
class FileError : public std::ios_base::failure {
public:
    explicit FileError(const std::string& message) : std::ios_base::failure(message), message_(message) {}
    const char* what() const noexcept override { return message_.c_str(); }

private:
    std::string message_;
};

#if !defined(_WIN32)
// A file that shrinks while it is mapped (a download still running, a file rotated by another job)
// turns a read past its new end into SIGBUS, which would end the process. While a MappedFile lives,
// its address range is registered here; a SIGBUS inside a registered range maps a page of zeros
// over the faulting page, marks the range and returns, so the read goes on and the owner, checking
// `unchanged()` when it is done, throws "changed while it was read" instead of crashing. A SIGBUS
// anywhere else goes to whatever handled it before (Python's faulthandler, or the default: death).
namespace guarded_mapping {

struct Region {
    std::atomic<int> in_use{0};
    std::atomic<uintptr_t> begin{0};
    std::atomic<uintptr_t> end{0};
    std::atomic<int> faulted{0};
};

constexpr size_t kRegions = 64;  // more live mappings than this are simply not guarded
inline Region regions[kRegions];
inline struct sigaction previous;
inline uintptr_t page_size = 4096;

inline void on_sigbus(int signum, siginfo_t* info, void* context) {
    const uintptr_t address = uintptr_t(info->si_addr);
    for (Region& region : regions) {
        if (region.begin.load(std::memory_order_acquire) <= address &&
            address < region.end.load(std::memory_order_acquire)) {
            void* page = reinterpret_cast<void*>(address / page_size * page_size);
            if (::mmap(page, page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
                region.faulted.store(1, std::memory_order_release);
                return;  // the faulting read runs again and reads zeros
            }
        }
    }
    if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
        previous.sa_sigaction(signum, info, context);
    } else if ((previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler != SIG_DFL &&
               previous.sa_handler != SIG_IGN) {
        previous.sa_handler(signum);
    } else {
        ::signal(signum, SIG_DFL);  // the faulting read runs again and ends the process, as without us
    }
}

inline void install_once() {
    static std::once_flag installed;
    std::call_once(installed, [] {
        page_size = uintptr_t(::sysconf(_SC_PAGESIZE));
        struct sigaction action;
        std::memset(&action, 0, sizeof action);
        action.sa_sigaction = on_sigbus;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        ::sigaction(SIGBUS, &action, &previous);
    });
}

// The region's slot, or nullptr when every slot is taken.
inline Region* guard(const void* data, size_t size) {
    install_once();
    for (Region& region : regions) {
        int free = 0;
        if (region.in_use.compare_exchange_strong(free, 1, std::memory_order_acq_rel)) {
            region.faulted.store(0, std::memory_order_relaxed);
            region.end.store(uintptr_t(data) + size, std::memory_order_release);
            region.begin.store(uintptr_t(data), std::memory_order_release);
            return &region;
        }
    }
    return nullptr;
}

inline void unguard(Region* region) {
    if (region == nullptr) return;
    region->begin.store(0, std::memory_order_release);
    region->end.store(0, std::memory_order_release);
    region->in_use.store(0, std::memory_order_release);
}

}  // namespace guarded_mapping
#endif

// Read-only view of a whole file: memory-mapped where possible, so a 12 GB corpus costs no heap.
// Whoever reads it calls `check_unchanged()` when done: a file that changed meanwhile is an error.
class MappedFile {
public:
    explicit MappedFile(const std::string& path) {
#if defined(_WIN32)
        std::ifstream file(path, std::ios::binary);
        if (!file) throw FileError("cannot open " + path);
        contents_.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
        data_ = contents_.data();
        size_ = contents_.size();
#else
        const int fd = ::open(path.c_str(), O_RDONLY);
        if (fd < 0) fail("cannot open", path);
        struct stat info;
        if (::fstat(fd, &info) != 0) {
            const int error = errno;
            ::close(fd);
            errno = error;
            fail("cannot stat", path);
        }
        if (!S_ISREG(info.st_mode)) {
            ::close(fd);
            throw FileError("not a regular file: " + path);
        }
        size_ = size_t(info.st_size);
        opened_ = info;
        if (size_ > 0) {
            void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (mapped == MAP_FAILED) {
                const int error = errno;
                ::close(fd);
                errno = error;
                fail("cannot memory-map", path);
            }
            mapped_ = mapped;
            data_ = static_cast<const char*>(mapped);
            region_ = guarded_mapping::guard(mapped, size_);
        }
        fd_ = fd;  // kept open to see, at the end, whether the file changed
#endif
        path_ = path;
    }

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    ~MappedFile() {
#if !defined(_WIN32)
        guarded_mapping::unguard(region_);
        if (mapped_ != nullptr) ::munmap(mapped_, size_);
        if (fd_ >= 0) ::close(fd_);
#endif
    }

    // `work()`'s result, checked: when the file changed, that error replaces the result or whatever
    // `work` threw (a read that met zeros may fail as invalid UTF-8 first).
    template <class Work>
    auto checked(Work&& work) const -> decltype(work()) {
        try {
            auto result = work();
            check_unchanged();
            return result;
        } catch (...) {
            check_unchanged();
            throw;
        }
    }

    // Throws "PATH changed while it was read" when the file shrank under a read (the bytes read
    // there were zeros) or its size or modification time is not what they were when it was opened.
    void check_unchanged() const {
#if !defined(_WIN32)
        bool changed = region_ != nullptr && region_->faulted.load(std::memory_order_acquire) != 0;
        struct stat now;
        if (!changed && fd_ >= 0 && ::fstat(fd_, &now) == 0) {
            changed = now.st_size != opened_.st_size || now.st_mtim.tv_sec != opened_.st_mtim.tv_sec ||
                      now.st_mtim.tv_nsec != opened_.st_mtim.tv_nsec;
        }
        if (changed) throw FileError(path_ + " changed while it was read");
#endif
    }

    std::string_view view() const { return {data_, size_}; }

    // Perf/memory: drops the resident pages of [begin, begin + length) from this process, with the
    // pages on either side that a read of its first or last bytes may have mapped (a fault maps a
    // whole large folio, up to 2 MiB, on Linux 6). Mapped file pages count in the process's RSS, so
    // without this a 12 GB corpus would show a 12 GB peak; the page cache keeps them, and the mapping
    // is private and never written, so a later read (a neighbouring chunk's thread) refaults the
    // same bytes.
    void release(const char* begin, size_t length) const {
#if !defined(_WIN32)
        const uintptr_t start = uintptr_t(mapped_);
        const uintptr_t end = start + size_;
        if (mapped_ == nullptr || uintptr_t(begin) < start || uintptr_t(begin) > end) return;  // not ours
        const uintptr_t from = uintptr_t(begin) - std::min(uintptr_t(begin) - start, kFolioBytes);
        const uintptr_t to = std::min(end, uintptr_t(begin) + length + kFolioBytes);
        const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
        const uintptr_t first = from / page * page;
        const uintptr_t last = (to + page - 1) / page * page;  // to <= end: inside the mapping's pages
        if (first < last) {
            ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
        }
#else
        (void)begin;
        (void)length;
#endif
    }

private:
    static constexpr uintptr_t kFolioBytes = uintptr_t(2) << 20;

    [[noreturn]] static void fail(const char* what, const std::string& path) {
        throw FileError(std::string(what) + " " + path + ": " + std::strerror(errno));
    }

    const char* data_ = "";
    size_t size_ = 0;
    std::string path_;
#if defined(_WIN32)
    std::string contents_;
#else
    void* mapped_ = nullptr;
    int fd_ = -1;
    struct stat opened_ {};
    guarded_mapping::Region* region_ = nullptr;
#endif
};

}  // namespace bpe

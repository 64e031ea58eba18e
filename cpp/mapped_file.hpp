// A whole file as read-only memory: memory-mapped where possible, so a 12 GB corpus costs no heap.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ios>
#include <string>
#include <string_view>

#if defined(_WIN32)
#include <fstream>
#include <iterator>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace bpe {

// Read-only view of a whole file: memory-mapped where possible, so a 12 GB corpus costs no heap.
class MappedFile {
public:
    explicit MappedFile(const std::string& path) {
#if defined(_WIN32)
        std::ifstream file(path, std::ios::binary);
        if (!file) throw std::ios_base::failure("cannot open " + path);
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
            throw std::ios_base::failure("not a regular file: " + path);
        }
        size_ = size_t(info.st_size);
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
        }
        ::close(fd);  // the mapping stays valid
#endif
    }

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    ~MappedFile() {
#if !defined(_WIN32)
        if (mapped_ != nullptr) ::munmap(mapped_, size_);
#endif
    }

    std::string_view view() const { return {data_, size_}; }

    // Perf/memory: drops the resident pages wholly inside [begin, begin + length) from this process.
    // Mapped file pages count in the process's RSS, so without this a 12 GB corpus would show a
    // 12 GB peak; the page cache keeps them, and the mapping is private and never written, so a later
    // read (a neighbouring chunk's thread) refaults the same bytes.
    void release(const char* begin, size_t length) const {
#if !defined(_WIN32)
        const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
        const uintptr_t first = (uintptr_t(begin) + page - 1) / page * page;
        const uintptr_t last = (uintptr_t(begin) + length) / page * page;
        if (mapped_ != nullptr && first < last) {
            ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
        }
#else
        (void)begin;
        (void)length;
#endif
    }

private:
    [[noreturn]] static void fail(const char* what, const std::string& path) {
        throw std::ios_base::failure(std::string(what) + " " + path + ": " + std::strerror(errno));
    }

    const char* data_ = "";
    size_t size_ = 0;
#if defined(_WIN32)
    std::string contents_;
#else
    void* mapped_ = nullptr;
#endif
};

}  // namespace bpe

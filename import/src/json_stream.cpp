#include "json_stream.h"

#include <zlib.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace npuscope::import {
namespace {

constexpr size_t kChunk = size_t{8} << 20;          // read size
constexpr size_t kMaxEvent = size_t{256} << 20;     // one event larger than this is refused
constexpr size_t kMaxMetadata = size_t{64} << 20;   // top-level members kept beyond the events

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Bytes that end a run of string content, and bytes that matter between strings.
struct ByteTable {
  bool t[256] = {};
  constexpr ByteTable(const char* set) {
    for (; *set; ++set) t[static_cast<unsigned char>(*set)] = true;
  }
  constexpr bool operator[](unsigned char c) const { return t[c]; }
};
constexpr ByteTable kStringStop("\"\\");
constexpr ByteTable kStructural("\"{}[]");

#if defined(__SSE2__)
// The body of an event, 64 bytes at a time (the scanner's hot loop): bit masks of quotes,
// backslashes and brackets, strings found by a prefix XOR of the quotes, and only the brackets
// outside strings looked at. `in_string` and `depth` carry the state across blocks, as the
// byte-by-byte code keeps them. Returns the first byte the byte-by-byte code must see: a
// backslash (escapes), a bracket closing the event's own depth (the event ends), or `end`.
struct Block64 {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0;
};
inline Block64 classify64(const char* p) {
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'), lower = _mm_set1_epi8(0x20);
  Block64 b;
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i folded = _mm_or_si128(v, lower);  // '[' -> '{', ']' -> '}'
    auto bits = [&](__m128i eq) { return static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(eq))) << (16 * k); };
    b.quote |= bits(_mm_cmpeq_epi8(v, quote));
    b.backslash |= bits(_mm_cmpeq_epi8(v, backslash));
    b.open |= bits(_mm_cmpeq_epi8(folded, open));
    b.close |= bits(_mm_cmpeq_epi8(folded, close));
  }
  return b;
}
inline uint64_t prefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}
size_t scanEventBody(const char* p, size_t i, size_t end, int& depth, int event_depth, bool& in_string) {
  while (i < end) {
    const Block64 b = classify64(p + i);  // reads up to 63 bytes past `end`: the buffer's padding
    const size_t n = std::min<size_t>(64, end - i);
    uint64_t valid = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
    const uint64_t backslash = b.backslash & valid;
    if (backslash) valid = (backslash & (~backslash + 1)) - 1;  // the bytes before the first one
    const uint64_t inside = prefixXor(b.quote & valid) ^ (in_string ? ~uint64_t{0} : 0);
    uint64_t brackets = (b.open | b.close) & valid & ~inside;
    while (brackets) {
      const int k = __builtin_ctzll(brackets);
      brackets &= brackets - 1;
      if ((b.open >> k) & 1) {
        ++depth;
      } else if (depth > event_depth + 1) {
        --depth;
      } else {
        in_string = false;
        return i + static_cast<size_t>(k);
      }
    }
    if (backslash) {
      const int k = __builtin_ctzll(backslash);
      in_string = (inside >> k) & 1;
      return i + static_cast<size_t>(k);
    }
    in_string = (inside >> (n - 1)) & 1;
    i += n;
  }
  return end;
}
#endif

std::string where(const std::string& path, int64_t offset) {
  return path + ": byte " + std::to_string(offset);
}

// The decompressed file in one buffer with kPadding spare bytes: each refill keeps the bytes from
// the unfinished event on (everything before it is dropped) and appends a read; the buffer
// doubles when an event outgrows it.
class EventBuffer {
 public:
  EventBuffer(gzFile_s* in, const std::string& path, int64_t file_size)
      : in_(in), path_(path), file_size_(file_size),
        // Reads of up to 8 MiB, fewer for a small file (a gzip's content is larger than the file:
        // the buffer grows as an event needs).
        chunk_(std::clamp<size_t>(static_cast<size_t>(file_size) + 1, 4096, kChunk)),
        storage_(new char[chunk_ + JsonEventStream::kPadding]),  // not zeroed: only read bytes are scanned
        capacity_(chunk_) {}

  const char* data() const { return storage_.get(); }
  size_t filled() const { return filled_; }
  int64_t base() const { return base_; }  // file offset of data()[0]
  bool eof() const { return eof_; }

  // Drops the bytes before *event_start (before *pos when no event is open), moving both, and
  // reads more.
  Status refill(size_t* pos, int64_t* event_start, const JsonEventStream::ProgressFn& progress) {
    const size_t keep_from = *event_start >= 0 ? static_cast<size_t>(*event_start) : filled_;
    if (keep_from > 0) {
      std::memmove(storage_.get(), storage_.get() + keep_from, filled_ - keep_from);
      base_ += static_cast<int64_t>(keep_from);
      filled_ -= keep_from;
      *pos -= keep_from;
      if (*event_start >= 0) *event_start = 0;
    }
    if (capacity_ - filled_ < chunk_ / 2) RETURN_IF_ERROR(grow());
    const unsigned room = static_cast<unsigned>(std::min(capacity_ - filled_, size_t{1} << 30));
    const int n = gzread(in_, storage_.get() + filled_, room);
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(in_, &code);
      return invalidArgument(where(path_, base_ + static_cast<int64_t>(filled_)) + ": cannot decompress (" +
                             (msg ? msg : "zlib error") + ")");
    }
    if (n == 0) {
      int code = 0;
      gzerror(in_, &code);
      if (code != Z_OK && code != Z_STREAM_END) {
        return invalidArgument(where(path_, base_ + static_cast<int64_t>(filled_)) +
                               ": the gzip stream is truncated (unexpected end of file)");
      }
      eof_ = true;
    }
    filled_ += static_cast<size_t>(n);
    std::memset(storage_.get() + filled_, ' ', JsonEventStream::kPadding);
    if (progress && !progress(static_cast<int64_t>(gzoffset(in_)), file_size_)) {
      return failedPrecondition(path_ + ": import cancelled");
    }
    return Status::ok();
  }

 private:
  // An event longer than the reads so far: twice the room (a long event costs its length).
  Status grow() {
    if (filled_ >= kMaxEvent) {
      return invalidArgument(where(path_, base_) + ": an event of more than 256 MB (is this a trace file?)");
    }
    const size_t grown = std::max(capacity_ * 2, capacity_ + chunk_);
    std::unique_ptr<char[]> bigger(new char[grown + JsonEventStream::kPadding]);
    std::memcpy(bigger.get(), storage_.get(), filled_);
    storage_ = std::move(bigger);
    capacity_ = grown;
    return Status::ok();
  }

  gzFile_s* in_;
  const std::string& path_;
  const int64_t file_size_;
  const size_t chunk_;
  std::unique_ptr<char[]> storage_;
  size_t capacity_;     // bytes of storage before the padding
  size_t filled_ = 0;   // bytes holding file data
  int64_t base_ = 0;
  bool eof_ = false;
};

// A plain (not gzip) file, mapped instead of read: the kernel's copy of every byte into a read
// buffer was an eighth of the reading's CPU time on a 1.1 GB trace. The scanner sees the file
// grow by kChunk per refill (progress and cancelling as with reads); the pages it is done with
// are dropped from the mapping (MADV_DONTNEED), so the import holds a few chunks of it at most.
// Zero pages follow the file's last byte, for the scanner's and simdjson's padding.
class MappedEventBuffer {
 public:
  // Null (and the file is read instead) when it cannot be mapped.
  static std::unique_ptr<MappedEventBuffer> open(const std::string& path, int fd, size_t size) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t mapped = (size + page - 1) / page * page;
    const size_t total = mapped + (JsonEventStream::kPadding + page - 1) / page * page;
    void* area = ::mmap(nullptr, total, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return nullptr;
    if (::mmap(area, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
      ::munmap(area, total);
      return nullptr;
    }
    ::madvise(area, size, MADV_SEQUENTIAL);
    return std::unique_ptr<MappedEventBuffer>(
        new MappedEventBuffer(static_cast<const char*>(area), total, size, page, path));
  }
  ~MappedEventBuffer() { ::munmap(const_cast<char*>(data_), total_); }

  const char* data() const { return data_; }
  size_t filled() const { return filled_; }
  int64_t base() const { return 0; }
  bool eof() const { return filled_ == size_; }

  // Shows the next kChunk bytes; drops the pages before *event_start (before *pos when no event
  // is open). Offsets stay file offsets: nothing moves.
  Status refill(size_t* pos, int64_t* event_start, const JsonEventStream::ProgressFn& progress) {
    const size_t keep_from = *event_start >= 0 ? static_cast<size_t>(*event_start) : *pos;
    if (filled_ - keep_from >= kMaxEvent) {
      return invalidArgument(where(path_, static_cast<int64_t>(keep_from)) +
                             ": an event of more than 256 MB (is this a trace file?)");
    }
    const size_t drop_to = keep_from / page_ * page_;
    if (drop_to > dropped_) {
      ::madvise(const_cast<char*>(data_) + dropped_, drop_to - dropped_, MADV_DONTNEED);
      dropped_ = drop_to;
    }
    filled_ = std::min(size_, filled_ + kChunk);
    if (progress && !progress(static_cast<int64_t>(filled_), static_cast<int64_t>(size_))) {
      return failedPrecondition(path_ + ": import cancelled");
    }
    return Status::ok();
  }

 private:
  MappedEventBuffer(const char* data, size_t total, size_t size, size_t page, const std::string& path)
      : data_(data), total_(total), size_(size), page_(page), path_(path) {}
  const char* data_;
  size_t total_, size_, page_;
  const std::string& path_;
  size_t filled_ = 0, dropped_ = 0;
};

// Files smaller than this are read: mapping one costs more than copying it.
constexpr size_t kMapAtLeast = size_t{4} << 20;

}  // namespace

// The scanner: a byte-level state machine over the top-level JSON value, kept across chunks.
// Outside the events it follows keys at depth 1 (to find "traceEvents") and copies the bytes into
// the metadata; inside the events array it only tracks strings and brackets, and hands each
// element out whole.
class JsonEventStream::Scanner {
 public:
  Scanner(JsonEventStream& out, const std::string& path, const EventFn& on_event)
      : out_(out), path_(path), on_event_(on_event) {}

  // Scans data[pos, end) (base: the file offset of data[0]); on return *pos is where it stopped.
  Status scan(const char* p, size_t end, int64_t base, size_t* pos) {
    size_t i = *pos;
    copy_from_ = i;  // bytes copied into the metadata: from here up to the scan position
    for (; i < end && !done; ++i) {
#if defined(__SSE2__)
      if (event_start >= 0 && !escape_) {
        i = scanEventBody(p, i, end, depth_, event_depth_, in_string);
        if (i >= end) break;
      }
#endif
      const char c = p[i];
      if (in_string) {
        i = stringByte(p, i, end);
        continue;
      }
      if (depth_ == event_depth_ && (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
        // Between two events: separators, nothing to track (most of the bytes outside events).
        size_t k = i + 1;
        while (k < end && (p[k] == ',' || p[k] == ' ' || p[k] == '\n' || p[k] == '\r' || p[k] == '\t')) ++k;
        i = k - 1;
        continue;
      }
      if (event_start >= 0 && !kStructural[static_cast<unsigned char>(c)]) {
        // Inside an event only brackets and strings matter.
        size_t k = i + 1;
        while (k < end && !kStructural[static_cast<unsigned char>(p[k])]) ++k;
        i = k - 1;
        continue;
      }
      const Status st = structuralByte(p, i, base);
      if (!st.isOk()) {
        *pos = i;
        return st;
      }
    }
    if (started && !out_.bare_array_ && event_depth_ != 2 && !done) keep(p + copy_from_, i - copy_from_);
    *pos = i;
    return Status::ok();
  }

  // The end of the file: whether the value was complete.
  Status finish(int64_t end_offset) {
    if (!started) return invalidArgument(path_ + ": empty file (expected a JSON trace)");
    if (!done || in_string) return invalidArgument(where(path_, end_offset) + ": the JSON ends early (truncated file?)");
    if (metadata_full_ || out_.metadata_.empty()) out_.metadata_ = "{}";
    return Status::ok();
  }

  bool started = false;
  bool done = false;
  bool in_string = false;
  int64_t event_start = -1;  // buffer offset of the event being read, -1: none

 private:
  // A byte inside a string: returns the last byte consumed (a run of plain content at once).
  size_t stringByte(const char* p, size_t i, size_t end) {
    const char c = p[i];
    if (escape_) {
      escape_ = false;
      if (in_key_) key_ += c;
      return i;
    }
    if (c == '\\') {
      escape_ = true;
      if (in_key_) key_ += c;
      return i;
    }
    if (c == '"') {
      in_string = false;
      in_key_ = false;
      return i;
    }
    if (in_key_) {
      key_ += c;
      return i;
    }
    size_t k = i + 1;  // run to the closing quote or a backslash
    while (k < end && !kStringStop[static_cast<unsigned char>(p[k])]) ++k;
    return k - 1;
  }

  Status notJson(int64_t offset) const {
    return invalidArgument(where(path_, offset) + ": not JSON (expected { or [)");
  }

  // A byte outside strings that is not skipped inside an event.
  Status structuralByte(const char* p, size_t i, int64_t base) {
    const char c = p[i];
    switch (c) {
      case ' ': case '\n': case '\r': case '\t': case ',':
        if (c == ',' && depth_ == 1 && !out_.bare_array_) key_pending_ = true;
        return Status::ok();
      case '"':
        if (!started) return notJson(base + static_cast<int64_t>(i));
        in_string = true;
        if (depth_ == 1 && !out_.bare_array_ && key_pending_) {
          in_key_ = true;
          key_pending_ = false;
          key_.clear();
        }
        return Status::ok();
      case ':':
        if (depth_ == 1) after_colon_ = true;
        return Status::ok();
      case '{':
      case '[':
        open(p, i);
        return Status::ok();
      case '}':
      case ']':
        if (!started) return notJson(base + static_cast<int64_t>(i));
        return close(p, i, base);
      default:
        if (!started) return notJson(base + static_cast<int64_t>(i));
        if (depth_ == 1) after_colon_ = false;
        return Status::ok();
    }
  }

  void open(const char* p, size_t i) {
    const char c = p[i];
    if (!started) {  // the top-level value: an object, or a bare array of events
      started = true;
      if (c == '[') {
        out_.bare_array_ = true;
        event_depth_ = 1;
      } else {
        key_pending_ = true;
      }
      depth_ = 1;
      if (!out_.bare_array_) keep(p + i, 1);
      copy_from_ = i + 1;
      return;
    }
    if (depth_ == 1 && after_colon_ && c == '[' && key_ == "traceEvents" && event_depth_ < 0) {
      // The events array: its elements are handed out; the metadata gets "[]".
      keep(p + copy_from_, i - copy_from_);
      keep("[]", 2);
      event_depth_ = 2;
      depth_ = 2;
      after_colon_ = false;
      return;
    }
    after_colon_ = false;
    ++depth_;
    if (depth_ == event_depth_ + 1 && c == '{') event_start = static_cast<int64_t>(i);
  }

  Status close(const char* p, size_t i, int64_t base) {
    if (event_depth_ >= 0 && depth_ == event_depth_ + 1 && p[i] == '}' && event_start >= 0) {
      const size_t s = static_cast<size_t>(event_start);
      // simdjson reads up to 64 bytes past the event: the buffer has them (the rest of the
      // file or the padding).
      ++out_.events_;
      RETURN_IF_ERROR(on_event_(p + s, i + 1 - s, base + static_cast<int64_t>(s)));
      event_start = -1;
    }
    --depth_;
    if (event_depth_ >= 0 && depth_ < event_depth_) {  // the events array closed
      if (out_.bare_array_) {
        done = true;
        return Status::ok();
      }
      event_depth_ = -2;  // no second events array
      copy_from_ = i + 1;
    }
    if (depth_ == 0) {
      if (!out_.bare_array_) keep(p + copy_from_, i + 1 - copy_from_);
      copy_from_ = i + 1;
      done = true;
    }
    return Status::ok();
  }

  void keep(const char* p, size_t n) {
    if (metadata_full_ || out_.bare_array_) return;
    if (out_.metadata_.size() + n > kMaxMetadata) {
      metadata_full_ = true;
      return;
    }
    out_.metadata_.append(p, n);
  }

  JsonEventStream& out_;
  const std::string& path_;
  const EventFn& on_event_;
  int depth_ = 0;
  bool escape_ = false;
  int event_depth_ = -1;      // depth of the array holding the events once inside it, else -1
  bool key_pending_ = false;  // depth 1 of an object: the next string is a key
  std::string key_;           // the last key read at depth 1
  bool in_key_ = false;
  bool after_colon_ = false;  // depth 1: a value follows
  bool metadata_full_ = false;
  size_t copy_from_ = 0;
};

Status JsonEventStream::run(const std::string& path, const EventFn& on_event, const ProgressFn& progress) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return notFound(path + ": no such file");
  std::unique_ptr<gzFile_s, GzCloser> in(gzopen(path.c_str(), "rb"));
  if (!in) return ioError(path + ": cannot open (" + std::strerror(errno) + ")");
  gzbuffer(in.get(), 1 << 20);

  metadata_.clear();
  events_ = 0;
  Scanner scanner(*this, path, on_event);
  auto scanAll = [&](auto& buf) -> Status {
    size_t pos = 0;  // scan position in the buffer
    while (!scanner.done) {
      if (pos >= buf.filled() && !buf.eof()) {
        RETURN_IF_ERROR(buf.refill(&pos, &scanner.event_start, progress));
      } else {
        RETURN_IF_ERROR(scanner.scan(buf.data(), buf.filled(), buf.base(), &pos));
      }
      if (buf.eof() && pos >= buf.filled()) break;
    }
    return scanner.finish(buf.base() + static_cast<int64_t>(buf.filled()));
  };
  // A plain file of some size is mapped; gzip (by its magic bytes) and the rest are read.
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) >= kMapAtLeast && gzdirect(in.get())) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      std::unique_ptr<MappedEventBuffer> mapped = MappedEventBuffer::open(path, fd, static_cast<size_t>(st.st_size));
      ::close(fd);  // the mapping keeps the file
      if (mapped) return scanAll(*mapped);
    }
  }
  EventBuffer buf(in.get(), path, static_cast<int64_t>(st.st_size));
  return scanAll(buf);
}

}  // namespace npuscope::import

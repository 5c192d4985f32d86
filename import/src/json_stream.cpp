#include "json_stream.h"

#include <zlib.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <memory>
#include <sys/stat.h>
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

}  // namespace

Status JsonEventStream::run(const std::string& path, const EventFn& on_event, const ProgressFn& progress) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return notFound(path + ": no such file");
  std::unique_ptr<gzFile_s, GzCloser> in(gzopen(path.c_str(), "rb"));
  if (!in) return ioError(path + ": cannot open (" + std::strerror(errno) + ")");
  gzbuffer(in.get(), 1 << 20);

  metadata_.clear();
  events_ = 0;
  // Reads of up to 8 MiB, fewer for a small file (a gzip's content is larger than the file:
  // the buffer grows as an event needs).
  const size_t chunk = std::clamp<size_t>(static_cast<size_t>(st.st_size) + 1, 4096, kChunk);
  std::unique_ptr<char[]> storage(new char[chunk + kPadding]);  // not zeroed: only read bytes are scanned
  size_t capacity = chunk;  // bytes of storage before the padding
  char* bufp = storage.get();
  size_t filled = 0;       // bytes of buf holding file data
  int64_t base = 0;        // file offset of buf[0]
  size_t pos = 0;          // scan position in buf

  // Scanner state, kept across chunks.
  int depth = 0;
  bool in_string = false, escape = false;
  bool started = false;
  int event_depth = -1;    // depth of the array holding the events once inside it, else -1
  int64_t event_start = -1;  // buf offset of the event being read, -1: none
  bool key_pending = false;  // depth 1 of an object: the next string is a key
  std::string key;           // the last key read at depth 1
  bool in_key = false;
  bool after_colon = false;  // depth 1: a value follows
  bool metadata_full = false;
  bool done = false;

  auto keep = [&](const char* p, size_t n) {
    if (metadata_full || bare_array_) return;
    if (metadata_.size() + n > kMaxMetadata) {
      metadata_full = true;
      return;
    }
    metadata_.append(p, n);
  };

  bool eof = false;
  while (!done) {
    if (pos >= filled && !eof) {
      // Keep the unfinished event; drop everything before it.
      size_t keep_from = event_start >= 0 ? static_cast<size_t>(event_start) : filled;
      if (keep_from > 0) {
        std::memmove(bufp, bufp + keep_from, filled - keep_from);
        base += static_cast<int64_t>(keep_from);
        filled -= keep_from;
        pos -= keep_from;
        if (event_start >= 0) event_start = 0;
      }
      if (capacity - filled < chunk / 2) {
        if (filled >= kMaxEvent) {
          return invalidArgument(where(path, base) + ": an event of more than 256 MB (is this a trace file?)");
        }
        // An event longer than the reads so far: twice the room (a long event costs its length).
        const size_t grown = std::max(capacity * 2, capacity + chunk);
        std::unique_ptr<char[]> bigger(new char[grown + kPadding]);
        std::memcpy(bigger.get(), bufp, filled);
        storage = std::move(bigger);
        bufp = storage.get();
        capacity = grown;
      }
      const unsigned room = static_cast<unsigned>(std::min(capacity - filled, size_t{1} << 30));
      const int n = gzread(in.get(), bufp + filled, room);
      if (n < 0) {
        int code = 0;
        const char* msg = gzerror(in.get(), &code);
        return invalidArgument(where(path, base + static_cast<int64_t>(filled)) + ": cannot decompress (" +
                               (msg ? msg : "zlib error") + ")");
      }
      if (n == 0) {
        int code = 0;
        gzerror(in.get(), &code);
        if (code != Z_OK && code != Z_STREAM_END) {
          return invalidArgument(where(path, base + static_cast<int64_t>(filled)) +
                                 ": the gzip stream is truncated (unexpected end of file)");
        }
        eof = true;
      }
      filled += static_cast<size_t>(n);
      std::memset(bufp + filled, ' ', kPadding);
      if (progress && !progress(static_cast<int64_t>(gzoffset(in.get())), static_cast<int64_t>(st.st_size))) {
        return failedPrecondition(path + ": import cancelled");
      }
      if (eof && pos >= filled) break;
      continue;
    }
    const char* p = bufp;
    const size_t end = filled;
    size_t i = pos;
    // Bytes copied into the metadata: from `copy_from` up to the scan position.
    size_t copy_from = i;
    const bool copying = started && event_depth < 0;
    (void)copying;
    for (; i < end && !done; ++i) {
#if defined(__SSE2__)
      if (event_start >= 0 && !escape) {
        i = scanEventBody(p, i, end, depth, event_depth, in_string);
        if (i >= end) break;
      }
#endif
      const char c = p[i];
      if (in_string) {
        // Fast path: run to the next quote or backslash.
        if (escape) {
          escape = false;
          if (in_key) key += c;
          continue;
        }
        if (c == '\\') {
          escape = true;
          if (in_key) key += c;
          continue;
        }
        if (c == '"') {
          in_string = false;
          if (in_key) in_key = false;
          continue;
        }
        if (in_key) {
          key += c;
        } else {
          // Run to the closing quote or a backslash.
          size_t k = i + 1;
          while (k < end && !kStringStop[static_cast<unsigned char>(p[k])]) ++k;
          i = k - 1;
        }
        continue;
      }
      if (event_start >= 0 && !kStructural[static_cast<unsigned char>(c)]) {
        // Inside an event only brackets and strings matter.
        size_t k = i + 1;
        while (k < end && !kStructural[static_cast<unsigned char>(p[k])]) ++k;
        i = k - 1;
        continue;
      }
      switch (c) {
        case ' ': case '\n': case '\r': case '\t': case ',':
          if (c == ',' && depth == 1 && !bare_array_) key_pending = true;
          break;
        case '"':
          if (!started) return invalidArgument(where(path, base + static_cast<int64_t>(i)) + ": not JSON (expected { or [)");
          in_string = true;
          if (depth == 1 && !bare_array_ && key_pending) {
            in_key = true;
            key_pending = false;
            key.clear();
          }
          break;
        case ':':
          if (depth == 1) after_colon = true;
          break;
        case '{':
        case '[':
          if (!started) {
            started = true;
            if (c == '[') {
              bare_array_ = true;
              event_depth = 1;
            } else {
              key_pending = true;
            }
            depth = 1;
            if (!bare_array_) keep(p + i, 1);
            copy_from = i + 1;
            break;
          }
          if (depth == 1 && after_colon && c == '[' && key == "traceEvents" && event_depth < 0) {
            // The events array: its elements are handed out; the metadata gets "[]".
            keep(p + copy_from, i - copy_from);
            keep("[]", 2);
            event_depth = 2;
            depth = 2;
            after_colon = false;
            break;
          }
          after_colon = false;
          ++depth;
          if (depth == event_depth + 1 && c == '{') event_start = static_cast<int64_t>(i);
          break;
        case '}':
        case ']':
          if (!started) return invalidArgument(where(path, base + static_cast<int64_t>(i)) + ": not JSON (expected { or [)");
          if (event_depth >= 0 && depth == event_depth + 1 && c == '}' && event_start >= 0) {
            const size_t s = static_cast<size_t>(event_start);
            const size_t n = i + 1 - s;
            // simdjson reads up to 64 bytes past the event: the buffer has them (the rest of the
            // file or the padding).
            ++events_;
            RETURN_IF_ERROR(on_event(p + s, n, base + static_cast<int64_t>(s)));
            event_start = -1;
          }
          --depth;
          if (event_depth >= 0 && depth < event_depth) {
            // The events array closed.
            if (bare_array_) {
              done = true;
              break;
            }
            event_depth = -2;  // no second events array
            copy_from = i + 1;
          }
          if (depth == 0) {
            if (!bare_array_) keep(p + copy_from, i + 1 - copy_from);
            copy_from = i + 1;
            done = true;
          }
          break;
        default:
          if (!started) return invalidArgument(where(path, base + static_cast<int64_t>(i)) + ": not JSON (expected { or [)");
          if (depth == 1) after_colon = false;
          break;
      }
    }
    if (started && !bare_array_ && event_depth != 2 && !done) keep(p + copy_from, i - copy_from);
    pos = i;
    if (done) break;
    if (eof && pos >= filled) break;
  }
  if (!started) return invalidArgument(path + ": empty file (expected a JSON trace)");
  if (!done || in_string) {
    return invalidArgument(where(path, base + static_cast<int64_t>(filled)) +
                           ": the JSON ends early (truncated file?)");
  }
  if (metadata_full) metadata_ = "{}";
  if (metadata_.empty()) metadata_ = "{}";
  return Status::ok();
}

}  // namespace npuscope::import

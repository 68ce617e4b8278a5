// _core.pipeline: the streaming path from JSONL files to scores.
//
//   load_gold     GOLD.jsonl -> GoldIndex (ids, answer keys, strata codes), merged by id shards (GoldLoader)
//   score_stream  PRED.jsonl files -> scores.jsonl rows + per-row columns
//
// Lines are parsed, answers extracted, gold items looked up and rows
// formatted in parallel, chunk by chunk, while the previous chunk is merged:
// what depends on order (model codes by first appearance, a model's first
// answer kept, errors in line order) is decided per block of lines and per
// shard of gold items on worker threads, the calling thread keeping only
// short passes over the blocks; a writer thread writes the chunk before.
// A line this reader does
// not fully decide (malformed JSON, unusual values, an output the compiled
// extractor leaves undecided, any problem to report) goes to the Python
// reference for that one line, so rows and errors equal the reference path.
#include <fcntl.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "extract.hpp"
#include "json_line.hpp"
#include "metrics.hpp"
#include "parallel.hpp"
#include "pyrepr.hpp"

namespace py = pybind11;
using namespace std::string_view_literals;

namespace bm {
namespace {

constexpr int TASK_MCQ = 0, TASK_HKL = 1;
constexpr int ST_OK = 0, ST_UNPARSED = 1, ST_MISSING = 2;
constexpr int64_t HKL_LIMIT = 2047;
constexpr size_t CHUNK_BYTES = size_t(4) << 20;
const double NaN = std::numeric_limits<double>::quiet_NaN();

int task_code(const std::string& task) {
    if (task == "mcq") return TASK_MCQ;
    if (task == "hkl") return TASK_HKL;
    throw py::value_error("task must be one of mcq, hkl; got '" + task + "'");
}

// Same packing as benchmint.metrics.encode.hkl_key / choice_key.
int64_t hkl_key(const Hkl& h) {
    int64_t key = h.n;
    for (int k = 0; k < h.n; ++k) key = (key << 12) | (h.idx[k] + 2048);
    return key;
}

bool hkl_less(const Hkl& a, const Hkl& b) {  // Python tuple order
    for (int k = 0; k < std::min(a.n, b.n); ++k)
        if (a.idx[k] != b.idx[k]) return a.idx[k] < b.idx[k];
    return a.n < b.n;
}

// A normalised answer: sorted keys for intersections, and its JSON text.
struct Answer {
    std::vector<int64_t> keys;
    std::string json = "[]";
};

void build_letters(uint32_t mask, Answer& a) {
    a.keys.clear();
    a.json = "[";
    for (int k = 0; k < 26; ++k)
        if (mask >> k & 1u) {
            if (!a.keys.empty()) a.json.push_back(',');
            a.keys.push_back(k);
            a.json += "\"";
            a.json.push_back(char('A' + k));
            a.json += "\"";
        }
    a.json.push_back(']');
}

// Answers over the first ten letters are built once and copied (string copies reuse capacity).
void answer_from_letters(uint32_t mask, Answer& a) {
    constexpr uint32_t N = 1u << 10;
    static const std::vector<Answer> table = [] {
        std::vector<Answer> t(N);
        for (uint32_t m = 0; m < N; ++m) build_letters(m, t[m]);
        return t;
    }();
    if (mask < N) {
        a.keys = table[mask].keys;
        a.json = table[mask].json;
    } else {
        build_letters(mask, a);
    }
}

// Whether every 4-index reflection is a Miller-Bravais label, i = -(h + k).
bool bravais_ok(const std::vector<Hkl>& hkls) {
    for (const auto& h : hkls)
        if (h.n == 4 && h.idx[0] + h.idx[1] + h.idx[2] != 0) return false;
    return true;
}

// Drops (000)/(0000), sorts and deduplicates like normalize_hkls; false when an index is out of range or a
// 4-index label is not a Miller-Bravais one (the reference reports both).
bool answer_from_hkls(std::vector<Hkl>& hkls, Answer& a) {
    for (const auto& h : hkls)
        for (int k = 0; k < h.n; ++k)
            if (h.idx[k] > HKL_LIMIT || h.idx[k] < -HKL_LIMIT) return false;
    if (!bravais_ok(hkls)) return false;
    hkls.erase(
        std::remove_if(hkls.begin(), hkls.end(),
                       [](const Hkl& h) { return std::all_of(h.idx, h.idx + h.n, [](int64_t x) { return x == 0; }); }),
        hkls.end());
    std::sort(hkls.begin(), hkls.end(), hkl_less);
    hkls.erase(std::unique(hkls.begin(), hkls.end(),
                           [](const Hkl& x, const Hkl& y) { return !hkl_less(x, y) && !hkl_less(y, x); }),
               hkls.end());
    a.keys.clear();
    a.json = "[";
    for (size_t i = 0; i < hkls.size(); ++i) {
        if (i) a.json.push_back(',');
        a.json.push_back('[');
        for (int k = 0; k < hkls[i].n; ++k) {
            if (k) a.json.push_back(',');
            a.json += std::to_string(hkls[i].idx[k]);
        }
        a.json.push_back(']');
        a.keys.push_back(hkl_key(hkls[i]));
    }
    a.json.push_back(']');
    std::sort(a.keys.begin(), a.keys.end());
    return true;
}

// Reads an "answer" value of the task's kind; false (-> reference) on anything else.
bool read_answer(json::Cursor& c, int task, Answer& a) {
    if (!c.eat('[')) return c.fail();
    if (task == TASK_MCQ) {
        uint32_t mask = 0;
        if (!c.eat(']')) {
            std::string s;
            do {
                if (!json::read_string(c, s) || s.size() != 1) return c.fail();
                char ch = s[0];
                if (ch >= 'a' && ch <= 'z') ch = char(ch - 'a' + 'A');
                if (ch < 'A' || ch > 'Z') return c.fail();
                mask |= 1u << (ch - 'A');
            } while (c.eat(','));
            if (!c.eat(']')) return c.fail();
        }
        answer_from_letters(mask, a);
        return true;
    }
    std::vector<Hkl> hkls;
    if (!c.eat(']')) {
        do {
            if (!c.eat('[')) return c.fail();
            Hkl h;
            do {
                json::Number num;
                int64_t v;
                if (h.n == 4 || !json::read_number(c, num) || !json::small_int(num, v)) return c.fail();
                h.idx[h.n++] = v;
            } while (c.eat(','));
            if (!c.eat(']') || h.n < 3) return c.fail();
            hkls.push_back(h);
        } while (c.eat(','));
        if (!c.eat(']')) return c.fail();
    }
    return answer_from_hkls(hkls, a) || c.fail();  // out of range: the reference reports it
}

bool is_blank(std::string_view line) {
    for (char ch : line)
        if (!(ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\x0b' || ch == '\x0c')) return false;
    return true;
}

bool plain_line(std::string_view line) {
    if (line.size() >= 3 && static_cast<unsigned char>(line[0]) == 0xEF) return false;  // BOM: leave to Python
    return json::valid_utf8(line);
}

// ------------------------------------------------------------ id table ----

inline uint64_t hash_bytes(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0x94D049BB133111EBULL;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 32);
}

// Open addressing over the gold ids, split into shards by the hash's top bits so that the gold loader fills
// the shards on separate threads (each shard's inserts by one thread, in line order); hashes are computed in
// the parallel parse. A slot holds an item number or -1 (empty); while the loader merges a chunk, a line of
// that chunk that becomes an item holds its slot as -2 - line until the item numbers are known.
struct IdTable {
    static constexpr int SHARD_BITS = 6;
    static constexpr size_t N_SHARDS = size_t(1) << SHARD_BITS;
    struct Shard {
        std::vector<int32_t> slots = std::vector<int32_t>(16, -1);
        size_t used = 0;
    };
    std::vector<Shard> shards = std::vector<Shard>(N_SHARDS);
    std::vector<uint64_t> hashes;  // per item

    static size_t shard_of(uint64_t h) { return size_t(h >> (64 - SHARD_BITS)); }

    int32_t find(const std::vector<std::string>& ids, std::string_view key, uint64_t h) const {
        const std::vector<int32_t>& slots = shards[shard_of(h)].slots;
        const size_t mask = slots.size() - 1;
        for (size_t i = h & mask;; i = (i + 1) & mask) {
            const int32_t v = slots[i];
            if (v < 0) return -1;
            if (hashes[size_t(v)] == h && ids[size_t(v)] == key) return v;
        }
    }
    // The slot of h's shard holding the entry same(v) accepts, else the empty slot where h goes.
    template <class Same>
    static size_t slot_of(const Shard& s, uint64_t h, Same&& same) {
        const size_t mask = s.slots.size() - 1;
        for (size_t i = h & mask;; i = (i + 1) & mask)
            if (s.slots[i] == -1 || same(s.slots[i])) return i;
    }
    // Doubles a shard's slots: hash_of(v) is an entry's hash, moved(v, slot) is told where it went.
    template <class HashOf, class Moved>
    static void grow(Shard& s, HashOf&& hash_of, Moved&& moved) {
        std::vector<int32_t> old(s.slots.size() * 2, -1);
        std::swap(old, s.slots);
        const size_t mask = s.slots.size() - 1;
        for (const int32_t v : old) {
            if (v == -1) continue;
            size_t i = hash_of(v) & mask;
            while (s.slots[i] != -1) i = (i + 1) & mask;
            s.slots[i] = v;
            moved(v, i);
        }
    }
};

// ---------------------------------------------------------------- gold ----

// A stratum field's values, coded in the order they first appear.
struct ValueTable {
    std::vector<std::string> values;
    std::unordered_map<std::string, int32_t> index;  // once past 16 values

    int32_t code(const std::string& v) {
        if (values.size() <= 16) {  // strata usually have a handful of values: a scan beats hashing
            for (size_t k = 0; k < values.size(); ++k)
                if (values[k] == v) return int32_t(k);
            if (values.size() == 16)  // growing past the scan: index what we have
                for (size_t k = 0; k < values.size(); ++k) index.emplace(values[k], int32_t(k));
            else {
                values.push_back(v);
                return int32_t(values.size()) - 1;
            }
        }
        auto [it, fresh] = index.emplace(v, int32_t(values.size()));
        if (fresh) values.push_back(v);
        return it->second;
    }
    void clear() {
        values.clear();
        index.clear();
    }
};

struct GoldIndex {
    std::string path;
    int task = TASK_MCQ;
    std::vector<std::string> by;
    std::vector<std::string> ids;
    IdTable index;
    std::vector<int64_t> key_offsets{0};
    std::vector<int64_t> keys;
    std::vector<std::vector<int32_t>> codes;       // per by-field, per item: codes into values
    std::vector<std::vector<std::string>> values;  // per by-field, in sorted order (UTF-8 byte order = code points)
    py::list errors;

    int32_t n_items() const { return int32_t(ids.size()); }
};

struct GoldLine {
    bool blank = false, decided = false;
    std::string rid;
    uint64_t hash = 0;
    Answer answer;
    std::vector<std::string> strata;
};

// Whether a string stratum value is the missing marker or might read as a JSON value (the reference then writes
// it as a JSON string): a number, a literal, or text that starts like an array, an object or a string.
bool reads_as_json(std::string_view s) {
    if (s == "(missing)"sv) return true;
    json::Cursor c(s);
    c.ws();
    const char* a = c.p;
    const char* b = c.end;
    while (b > a && json::is_ws(b[-1])) --b;
    const std::string_view t(a, size_t(b - a));
    if (t.empty()) return false;
    if (t[0] == '[' || t[0] == '{' || t[0] == '"') return true;
    for (std::string_view word : {"true"sv, "false"sv, "null"sv, "NaN"sv, "Infinity"sv, "-Infinity"sv})
        if (t == word) return true;
    if ((t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) && t.size() > 600) return true;  // long digit runs
    json::Cursor n(t);
    json::Number num;
    return json::read_number(n, num) && n.p == n.end;
}

void parse_gold_line(std::string_view line, const GoldIndex& g, GoldLine& out) {
    out.decided = false;
    if ((out.blank = is_blank(line))) return;
    if (!plain_line(line)) return;
    json::Cursor c(line);
    bool has_id = false, has_answer = false, has_meta = false;
    out.strata.assign(g.by.size(), "(missing)");
    std::vector<bool> seen(g.by.size(), false);
    auto meta_member = [&](std::string_view key) {
        auto it = std::find(g.by.begin(), g.by.end(), key);
        if (it == g.by.end()) return json::skip_value(c);
        const size_t f = size_t(it - g.by.begin());
        if (seen[f]) return false;  // a repeated key: the reference keeps the last
        seen[f] = true;
        std::string& value = out.strata[f];
        const char ch = c.peek();
        if (ch == '"') return json::read_string(c, value) && !reads_as_json(value);  // else the reference quotes it
        if (ch == '-' || (ch >= '0' && ch <= '9')) {
            json::Number num;
            if (!json::read_number(c, num) || !num.is_int || num.text == "-0") return false;
            value.assign(num.text);
            return true;
        }
        for (const char* word : {"true", "false", "null"})
            if (json::literal(c, word)) {
                value = word;
                return true;
            }
        return false;  // objects, arrays, floats: their JSON text comes from the reference
    };
    auto member = [&](std::string_view key) {
        if (key == "id"sv) return !has_id && (has_id = json::read_string(c, out.rid));
        if (key == "answer"sv) return !has_answer && (has_answer = read_answer(c, g.task, out.answer));
        if (key == "meta"sv) return !has_meta && (has_meta = json::read_object(c, meta_member));
        return json::skip_value(c);
    };
    if (!json::read_object(c, member)) return;
    c.ws();
    // an empty gold answer is a gold error the reference reports
    out.decided = c.ok && c.p == c.end && has_id && has_answer && !out.answer.keys.empty();
    if (out.decided) out.hash = hash_bytes(out.rid);
}

// Converts a reference answer (tuple of letters or of int tuples) into keys and JSON.
void answer_from_python(const py::handle& obj, int task, Answer& a) {
    if (task == TASK_MCQ) {
        uint32_t mask = 0;
        for (auto item : obj) mask |= 1u << (item.cast<std::string>()[0] - 'A');
        answer_from_letters(mask, a);
        return;
    }
    std::vector<Hkl> hkls;
    for (auto item : obj) {
        Hkl h;
        for (auto x : item) h.idx[h.n++] = x.cast<int64_t>();
        hkls.push_back(h);
    }
    answer_from_hkls(hkls, a);
}

// Successive chunks of whole lines of a file.
class ChunkReader {
   public:
    explicit ChunkReader(const std::string& path) : fh_(std::fopen(path.c_str(), "rb"), &std::fclose) {
        if (!fh_) throw py::value_error("cannot open " + path);
    }
    // Fills buf/lines with the next chunk; false at the end of the file.
    bool next(std::string& buf, std::vector<std::string_view>& lines, int64_t& first_line) {
        lines.clear();
        while (true) {
            if (eof_ && carry_.empty()) return false;
            buf = std::move(carry_);
            carry_.clear();
            size_t have = buf.size(), got = 0;
            if (!eof_) {
                buf.resize(have + CHUNK_BYTES);
                got = std::fread(buf.data() + have, 1, CHUNK_BYTES, fh_.get());
                buf.resize(have + got);
                eof_ = got < CHUNK_BYTES;
            }
            size_t end = buf.size();
            if (!eof_) {
                size_t nl = buf.rfind('\n');
                if (nl == std::string::npos) {  // a line longer than the chunk: keep reading
                    carry_ = std::move(buf);
                    continue;
                }
                carry_.assign(buf, nl + 1, std::string::npos);
                end = nl + 1;
            }
            for (size_t start = 0; start < end;) {
                size_t nl = buf.find('\n', start);
                size_t stop = (nl == std::string::npos || nl >= end) ? end : nl + 1;
                lines.emplace_back(buf.data() + start, stop - start);
                start = stop;
            }
            first_line = next_line_;
            next_line_ += int64_t(lines.size());
            return !lines.empty() || !eof_;
        }
    }

   private:
    std::unique_ptr<FILE, int (*)(FILE*)> fh_;
    std::string carry_;
    int64_t next_line_ = 1;
    bool eof_ = false;
};

constexpr int64_t PARSE_BLOCK = 256;  // lines a parse thread takes at a time; one text buffer each

template <class Line>
struct Chunk {
    std::string buf;
    std::vector<std::string_view> lines;
    std::vector<Line> parsed;
    std::vector<std::string> texts;  // per block of PARSE_BLOCK lines: what its parse formatted (rows)
    int64_t first_line = 1;
};

// Joins a thread on every exit path (std::thread must not be destroyed joinable).
struct Joiner {
    std::thread t;
    ~Joiner() {
        if (t.joinable()) t.join();
    }
};

// Reads and parses chunk k+1 on background threads while merge() handles
// chunk k on the calling thread (which holds the GIL for fallbacks).
// parse(line, Line&, std::string& text) must be thread-safe; text is the
// buffer of the line's block (Chunk::texts), written by one thread only;
// merge(Chunk&) runs in file order.
template <class Line, class Parse, class Merge>
void stream_file(const std::string& path, int workers, Parse&& parse, Merge&& merge) {
    ChunkReader reader(path);
    Chunk<Line> chunks[2];
    auto load = [&](Chunk<Line>& c) -> bool {
        if (!reader.next(c.buf, c.lines, c.first_line)) return false;
        c.parsed.resize(c.lines.size());
        c.texts.resize(size_t((int64_t(c.lines.size()) + PARSE_BLOCK - 1) / PARSE_BLOCK));
        parallel_blocks(int64_t(c.lines.size()), workers, PARSE_BLOCK, [&](int64_t b, int64_t e) {
            // b is a multiple of PARSE_BLOCK; one thread may be handed the whole range: line i's text goes
            // to texts[i / PARSE_BLOCK] either way.
            for (int64_t blk = b; blk < e; blk += PARSE_BLOCK) {
                std::string& text = c.texts[size_t(blk / PARSE_BLOCK)];
                text.clear();
                for (int64_t i = blk; i < std::min(e, blk + PARSE_BLOCK); ++i)
                    parse(c.lines[size_t(i)], c.parsed[size_t(i)], text);
            }
        });
        return true;
    };
    bool have = false;
    {
        py::gil_scoped_release nogil;
        std::exception_ptr failure;
        {
            // On threads of its own like every later read: what the calling thread does is the serial part.
            Joiner first{std::thread([&] {
                try {
                    have = load(chunks[0]);
                } catch (...) {
                    failure = std::current_exception();
                }
            })};
        }
        if (failure) std::rethrow_exception(failure);
    }
    for (int k = 0; have; k ^= 1) {
        bool have_next = false;
        std::exception_ptr failure;
        {
            Joiner bg{std::thread([&] {
                try {
                    have_next = load(chunks[k ^ 1]);
                } catch (...) {
                    failure = std::current_exception();
                }
            })};
            merge(chunks[k]);
            py::gil_scoped_release nogil;
            bg.t.join();
        }
        if (failure) std::rethrow_exception(failure);
        have = have_next;
    }
}

// Writes row buffers on background threads. One file (the default): one batch of buffers in flight, written by
// one thread with fwrite. Parts (rows_per_file > 0): the rows cut every rows_per_file rows into the files
// part-00000.jsonl, part-00001.jsonl, ... of the folder `path`, whose concatenation in name order is the one file;
// up to `threads` batches in flight, each batch on a thread of its own writing its pieces with pwrite() at offsets
// worked out here. A part is written by one thread at a time, so no write waits on a file's lock held by another:
// a batch's segments in the part the batch before is still writing are handed to that batch's thread, which
// writes them after its own (or, if it has finished, the new batch writes them). The caller gives each piece's
// row count, so a piece is only scanned for line ends where a part boundary falls inside it.
// BENCHMINT_WRITER_TIMES=FILE appends the writer's own figures at finish() (wall and thread CPU seconds spent
// writing, summed over its threads, bytes, batches) as a JSON line, for scripts/score_phases.py.
// Whatever may wait for the output's reader (opening a FIFO, joining a writer stuck on a full pipe, flushing)
// runs without the GIL: the reader may be a Python thread of this process.
class RowWriter {
   public:
    static constexpr size_t MAX_PARTS = 100000;
    struct Part {
        int fd = -1;
        int64_t rows = 0, bytes = 0;
    };
    explicit RowWriter(const std::string& path, int64_t rows_per_file = 0, int threads = 1)
        : fh_(rows_per_file > 0 ? nullptr : open_without_gil(path), &std::fclose),
          dir_(path),
          per_file_(rows_per_file),
          threads_(size_t(std::max(threads, 1))) {
        if (!fh_ && per_file_ <= 0) throw py::value_error("cannot write " + path);
    }
    ~RowWriter() {  // on an error's way out, with or without the GIL
        if (PyGILState_Check()) {
            py::gil_scoped_release nogil;
            close();
        } else {
            close();
        }
    }
    // Takes the pieces (written in order; pieces is left empty); rows[i]: the rows in pieces[i] (parts only).
    void write(std::vector<std::string>& pieces, const std::vector<size_t>& rows) {
        if (per_file_ > 0) return write_parts(pieces, rows);
        wait_all();
        Batch& b = flight_.emplace_back();
        std::swap(b.pieces, pieces);
        pieces.clear();
        b.worker = std::thread([this, &b] {
            const WriterClock start;
            bool ok = true;
            for (const std::string& p : b.pieces) {
                ok = ok && std::fwrite(p.data(), 1, p.size(), fh_.get()) == p.size();
                bytes_ += p.size();
            }
            if (!ok) ok_ = false;
            start.add_to(*this);
        });
    }
    void write(std::string& rows, size_t n_rows) {  // takes the contents; rows is left empty
        std::vector<std::string> one(1);
        std::swap(one[0], rows);
        write(one, std::vector<size_t>{n_rows});
    }
    void finish() {
        wait_all();
        bool ok = ok_;
        if (fh_) ok = std::fflush(fh_.get()) == 0 && ok;
        for (Part& p : parts_) ok = close_fd(p) && ok;
        if (!ok) throw py::value_error("writing the scores failed (disk full?)");
        report_times();
    }
    // The parts written, in order: (rows, bytes) each; empty for the one file.
    std::vector<std::pair<int64_t, int64_t>> parts() const {
        std::vector<std::pair<int64_t, int64_t>> out;
        for (const Part& p : parts_) out.emplace_back(p.rows, p.bytes);
        return out;
    }

   private:
    struct Segment {  // `size` bytes at `data` (in a batch's pieces), at `offset` in part `part` (file `fd`)
        const char* data;
        size_t size, part;
        int64_t offset;
        int fd;
    };
    struct Batch {
        std::vector<std::string> pieces;
        std::vector<Segment> segments;
        std::vector<size_t> done_parts;  // parts whose last bytes this batch writes: closed once it is joined
        size_t last_part = 0;            // the last part it writes
        // Later batches' segments in last_part, written by this batch's thread after its own until it closes.
        std::mutex handed_lock;
        std::vector<Segment> handed;
        bool closed = false;
        std::thread worker;
    };
    struct WriterClock {  // wall and this thread's CPU since construction
        std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
        double cpu = thread_cpu();
        static double thread_cpu() {
            timespec ts{};
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
            return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
        }
        void add_to(RowWriter& w) const {
            const double dw = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
            const double dc = thread_cpu() - cpu;
            std::lock_guard<std::mutex> lock(w.times_);
            w.wall_ += dw;
            w.cpu_ += dc;
            ++w.batches_;
        }
    };
    // The pieces cut at the part boundaries into segments, each at its offset in its part; the batch then runs on
    // a thread of its own once fewer than threads_ batches are in flight.
    void write_parts(std::vector<std::string>& pieces, const std::vector<size_t>& rows) {
        if (rows.size() != pieces.size()) throw std::logic_error("RowWriter: a row count per piece is needed");
        while (flight_.size() >= threads_) join_front();
        Batch& b = flight_.emplace_back();
        std::swap(b.pieces, pieces);
        pieces.clear();
        for (size_t i = 0; i < b.pieces.size(); ++i) {
            const std::string& p = b.pieces[i];
            size_t from = 0, left = rows[i];
            while (left > 0) {
                if (parts_.empty() || parts_.back().rows == per_file_) open_part();
                Part& part = parts_.back();
                const size_t take = size_t(std::min<int64_t>(int64_t(left), per_file_ - part.rows));
                size_t to = p.size();
                if (take < left) {  // the boundary falls inside this piece: after its take-th line
                    to = from;
                    for (size_t k = 0; k < take; ++k) {
                        to = p.find('\n', to);
                        if (to == std::string::npos)
                            throw std::logic_error("RowWriter: a piece holds fewer lines than its rows");
                        ++to;
                    }
                }
                b.segments.push_back(Segment{p.data() + from, to - from, parts_.size() - 1, part.bytes, part.fd});
                part.rows += int64_t(take);
                part.bytes += int64_t(to - from);
                if (part.rows == per_file_) b.done_parts.push_back(parts_.size() - 1);
                from = to;
                left -= take;
            }
            if (from != p.size()) throw std::logic_error("RowWriter: a piece holds more text than its rows");
        }
        if (!b.segments.empty()) b.last_part = b.segments.back().part;
        // The segments in the part the batch before still writes go to that batch's thread, unless it has closed
        // (then nothing else writes that part any more). A batch's parts follow each other, so only its leading
        // segments can be in that part.
        size_t lead = 0;
        if (owner_ != nullptr) {
            while (lead < b.segments.size() && b.segments[lead].part == owner_->last_part) ++lead;
            if (lead > 0) {
                std::lock_guard<std::mutex> lock(owner_->handed_lock);
                if (!owner_->closed) {
                    for (size_t k = 0; k < lead; ++k) handed_bytes_ += b.segments[k].size;
                    owner_->handed.insert(owner_->handed.end(), b.segments.begin(), b.segments.begin() + lead);
                    b.segments.erase(b.segments.begin(), b.segments.begin() + lead);
                }
            }
        }
        if (!b.segments.empty()) owner_ = &b;  // its thread now writes the last part opened
        b.worker = std::thread([this, &b] {
            const WriterClock start;
            bool ok = true;
            size_t n = 0;
            std::vector<Segment> todo;
            std::swap(todo, b.segments);
            for (;;) {
                for (const Segment& s : todo) {
                    ok = ok && pwrite_all(s.fd, s.data, s.size, s.offset);
                    n += s.size;
                }
                todo.clear();
                std::lock_guard<std::mutex> lock(b.handed_lock);
                if (b.handed.empty()) {
                    b.closed = true;
                    break;
                }
                std::swap(todo, b.handed);
            }
            bytes_ += n;
            if (!ok) ok_ = false;
            start.add_to(*this);
        });
    }
    void open_part() {
        if (parts_.size() >= MAX_PARTS)  // five digits keep the name order the row order
            throw py::value_error("more than 100,000 parts of " + std::to_string(per_file_) +
                                  " rows: a larger rows per file is needed");
        char name[32];
        std::snprintf(name, sizeof name, "/part-%05zu.jsonl", parts_.size());
        Part p;
        p.fd = ::open((dir_ + name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (p.fd < 0) throw py::value_error("cannot write " + dir_ + name + ": " + std::strerror(errno));
        parts_.push_back(p);
    }
    static bool pwrite_all(int fd, const char* data, size_t size, int64_t offset) {
        while (size > 0) {
            const ssize_t got = ::pwrite(fd, data, size, off_t(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) return false;
            data += got;
            size -= size_t(got);
            offset += got;
        }
        return true;
    }
    static bool close_fd(Part& p) {
        if (p.fd < 0) return true;
        const bool ok = ::close(p.fd) == 0;
        p.fd = -1;
        return ok;
    }
    void join_front() {
        Batch& b = flight_.front();
        if (b.worker.joinable()) b.worker.join();
        if (owner_ == &b) owner_ = nullptr;
        for (size_t k : b.done_parts)
            if (!close_fd(parts_[k])) ok_ = false;
        flight_.pop_front();
    }
    void report_times() const {
        const char* to = std::getenv("BENCHMINT_WRITER_TIMES");
        if (!to || !*to) return;
        std::unique_ptr<FILE, int (*)(FILE*)> fh(std::fopen(to, "a"), &std::fclose);
        if (fh)
            std::fprintf(fh.get(),
                         "{\"wall\": %.6f, \"cpu\": %.6f, \"bytes\": %zu, \"batches\": %zu, \"parts\": %zu, "
                         "\"threads\": %zu, \"handed_bytes\": %zu}\n",
                         wall_, cpu_, bytes_.load(), batches_, parts_.size(), per_file_ > 0 ? threads_ : 1,
                         handed_bytes_);
    }
    void wait_all() {
        while (!flight_.empty()) join_front();
    }
    void close() {
        wait_all();
        for (Part& p : parts_) close_fd(p);
        fh_.reset();
    }
    static FILE* open_without_gil(const std::string& path) {
        py::gil_scoped_release nogil;
        return std::fopen(path.c_str(), "wb");
    }
    std::unique_ptr<FILE, int (*)(FILE*)> fh_;
    std::string dir_;
    int64_t per_file_;
    size_t threads_;
    std::vector<Part> parts_;
    std::deque<Batch> flight_;  // the batches in flight, oldest first (a deque keeps their addresses)
    std::atomic<bool> ok_{true};
    std::mutex times_;
    double wall_ = 0, cpu_ = 0;  // the writer's own time, summed over batches and threads
    std::atomic<size_t> bytes_{0};
    size_t batches_ = 0, handed_bytes_ = 0;  // handed: bytes written by an earlier batch's thread
    Batch* owner_ = nullptr;                 // the batch in flight whose thread writes the last part opened, if any
};

// Runs fn on a thread of its own while the calling thread waits without the GIL, so that the calling thread's
// time is only what stays serial; fn's exception is raised here. With one worker fn runs on the calling thread:
// nothing runs beside it, and on a busy machine each hand-off to another thread waits for a time slice (at 2M
// rows the hand-offs of a run cost 1.3 s of wall under a load of 3 on 2 cores).
template <class Fn>
void off_thread(int workers, Fn&& fn) {
    py::gil_scoped_release nogil;
    if (workers <= 1) {
        fn();
        return;
    }
    std::exception_ptr failure;
    {
        Joiner t{std::thread([&] {
            try {
                fn();
            } catch (...) {
                failure = std::current_exception();
            }
        })};
    }
    if (failure) std::rethrow_exception(failure);
}

// Each gold line's tag, one byte a line in its parse block's text (the gold parse formats no rows): the id's
// shard when the line is to become an item unless its id came before, TAG_PROBE | shard when the id only
// counts for the duplicate check (the reference read an id but no usable answer), TAG_UNDECIDED for a line
// the reference has to read, TAG_SKIP for the rest.
constexpr uint8_t TAG_PROBE = 0x40, TAG_UNDECIDED = 0xFE, TAG_SKIP = 0xFF;
static_assert(IdTable::N_SHARDS <= TAG_PROBE, "a shard number must fit below TAG_PROBE");
constexpr int64_t GOLD_THREAD_LINES = 4096;  // fewer lines of a chunk per thread are not worth a thread

// Merges the gold file's chunks into a GoldIndex as a serial pass in line order would (the first line of an id
// gives the item, later ones duplicate_gold errors; items numbered in line order; errors in line order), with
// the work spread: the id table's shards are filled by threads each walking the chunk's lines in order; item
// numbers come from the count of first lines per part of the chunk; each part fills its items' ids, keys and
// stratum codes at known offsets, the codes into a table of the part's own, merged into the field's table
// afterwards. Only the lines the reference reads, the errors and the merge of the parts' value tables stay on
// the calling thread.
class GoldLoader {
   public:
    GoldLoader(GoldIndex& g, int workers, py::function fallback, py::function make_error)
        : g_(g),
          workers_(workers),
          fallback_(std::move(fallback)),
          make_error_(std::move(make_error)),
          fields_(g.by.size()) {
        g_.codes.resize(fields_);
        g_.values.resize(fields_);
    }

    static void parse(std::string_view line, const GoldIndex& g, GoldLine& out, std::string& tags) {
        parse_gold_line(line, g, out);
        tags.push_back(char(out.blank ? TAG_SKIP : out.decided ? uint8_t(IdTable::shard_of(out.hash)) : TAG_UNDECIDED));
    }

    // One chunk, in file order; called with the GIL held.
    void merge(Chunk<GoldLine>& chunk) {
        const size_t n = chunk.lines.size();
        read_undecided(chunk);
        const int64_t threads = std::clamp<int64_t>(int64_t(n) / GOLD_THREAD_LINES, 1, workers_);
        part_lines_ = std::max<size_t>(1, (n + size_t(threads) - 1) / size_t(threads));
        parts_ = (n + part_lines_ - 1) / part_lines_;
        off_thread(workers_, [&] {
            mark_first_lines(chunk, threads);
            fill_items(chunk);
        });
        merge_values();
        report(chunk);
        undecided_.clear();
    }

    // Codes follow the sorted order of each field's values (as the reference's strata()).
    void finish() {
        std::vector<std::vector<int32_t>> ranks(fields_);
        for (size_t f = 0; f < fields_; ++f) {
            const std::vector<std::string>& vals = values_[f].values;
            std::vector<int32_t> order(vals.size());
            for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
            std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return vals[a] < vals[b]; });
            ranks[f].resize(order.size());
            g_.values[f].resize(order.size());
            for (size_t r = 0; r < order.size(); ++r) {
                ranks[f][order[r]] = int32_t(r);
                g_.values[f][r] = vals[order[r]];
            }
        }
        if (fields_ == 0) return;
        off_thread(workers_, [&] {  // each segment's part codes -> the field's codes -> ranks
            parallel_blocks(int64_t(segments_.size()), workers_, 1, [&](int64_t b, int64_t e) {
                for (int64_t s = b; s < e; ++s) {
                    const Segment& seg = segments_[size_t(s)];
                    for (size_t f = 0; f < fields_; ++f)
                        for (int32_t item = seg.begin; item < seg.end; ++item) {
                            int32_t& c = g_.codes[f][size_t(item)];
                            c = ranks[f][size_t(seg.codes[f][size_t(c)])];
                        }
                }
            });
        });
    }

   private:
    // A part's items (a range of item numbers) and, per field, its value codes in the field's table.
    struct Segment {
        int32_t begin, end;
        std::vector<std::vector<int32_t>> codes;
    };
    struct Undecided {
        size_t line;
        py::object problem;
        bool usable;  // the reference gave an answer: its problem (if any) is only a warning
    };

    static uint8_t& tag(Chunk<GoldLine>& chunk, size_t i) {
        return reinterpret_cast<uint8_t&>(chunk.texts[i / size_t(PARSE_BLOCK)][i % size_t(PARSE_BLOCK)]);
    }

    // The reference reads the lines the parse left undecided, in line order (it needs the GIL).
    void read_undecided(Chunk<GoldLine>& chunk) {
        for (size_t blk = 0; blk < chunk.texts.size(); ++blk) {
            const std::string& tags = chunk.texts[blk];
            for (const char* p = tags.data(); (p = static_cast<const char*>(std::memchr(
                                                   p, char(TAG_UNDECIDED), size_t(tags.data() + tags.size() - p))));
                 ++p) {
                const size_t i = blk * size_t(PARSE_BLOCK) + size_t(p - tags.data());
                const std::string_view raw = chunk.lines[i];
                GoldLine& r = chunk.parsed[i];
                // (rid, answer, strata, problem)
                py::tuple res = fallback_(py::bytes(raw.data(), raw.size()), chunk.first_line + int64_t(i));
                py::object rid = res[0], answer = res[1], strata = res[2];
                uint8_t t = TAG_SKIP;
                if (!rid.is_none()) {
                    r.rid = rid.cast<std::string>();
                    r.hash = hash_bytes(r.rid);
                    t = uint8_t(IdTable::shard_of(r.hash));
                    if (answer.is_none()) {
                        t |= TAG_PROBE;
                    } else {
                        answer_from_python(answer, g_.task, r.answer);
                        r.strata = strata.cast<std::vector<std::string>>();
                    }
                }
                tag(chunk, i) = t;
                undecided_.push_back({i, res[3], !answer.is_none()});
            }
        }
    }

    // Walks the chunk's lines in order once per thread, each thread taking the lines of its own shards: a line
    // whose id is in the table (from an earlier chunk or line) is a duplicate; else it takes a slot as a new
    // item. Counts the new items and their keys per part.
    void mark_first_lines(Chunk<GoldLine>& chunk, int64_t threads) {
        const size_t n = chunk.lines.size(), T = size_t(threads);
        flags_.assign(n, 0);
        slot_.resize(n);
        counts_.assign(T * parts_ * 2, 0);
        IdTable& idx = g_.index;
        parallel_blocks(threads, workers_, 1, [&](int64_t t0, int64_t) {
            const size_t t = size_t(t0);
            uint8_t owner[256];
            for (size_t v = 0; v < 256; ++v)
                owner[v] = (v == TAG_SKIP || v == TAG_UNDECIDED) ? 0xFF : uint8_t((v & (TAG_PROBE - 1)) % T);
            const auto hash_of = [&](int32_t v) {
                return v >= 0 ? idx.hashes[size_t(v)] : chunk.parsed[size_t(-2 - int64_t(v))].hash;
            };
            const auto moved = [&](int32_t v, size_t at) {
                if (v < -1) slot_[size_t(-2 - int64_t(v))] = at;
            };
            int64_t* counts = counts_.data() + t * parts_ * 2;
            for (size_t blk = 0; blk < chunk.texts.size(); ++blk) {
                const std::string& tags = chunk.texts[blk];
                for (size_t j = 0; j < tags.size(); ++j) {
                    const uint8_t tg = uint8_t(tags[j]);
                    if (owner[tg] != t) continue;
                    const size_t i = blk * size_t(PARSE_BLOCK) + j;
                    const GoldLine& r = chunk.parsed[i];
                    IdTable::Shard& sh = idx.shards[tg & (TAG_PROBE - 1)];
                    const auto same = [&](int32_t v) {
                        if (v >= 0) return idx.hashes[size_t(v)] == r.hash && g_.ids[size_t(v)] == r.rid;
                        const GoldLine& o = chunk.parsed[size_t(-2 - int64_t(v))];
                        return o.hash == r.hash && o.rid == r.rid;
                    };
                    size_t at = IdTable::slot_of(sh, r.hash, same);
                    if (sh.slots[at] != -1) {
                        flags_[i] = DUPLICATE;
                        continue;
                    }
                    if (tg & TAG_PROBE) continue;
                    if ((sh.used + 1) * 2 > sh.slots.size()) {
                        IdTable::grow(sh, hash_of, moved);
                        at = IdTable::slot_of(sh, r.hash, [](int32_t) { return false; });
                    }
                    sh.slots[at] = int32_t(-2 - int64_t(i));
                    ++sh.used;
                    slot_[i] = at;
                    flags_[i] = FIRST;
                    counts[(i / part_lines_) * 2] += 1;
                    counts[(i / part_lines_) * 2 + 1] += int64_t(r.answer.keys.size());
                }
            }
        });
        // Each part's first item and key, then room for them.
        starts_.assign((parts_ + 1) * 2, 0);
        starts_[0] = g_.n_items();
        starts_[1] = int64_t(g_.keys.size());
        for (size_t p = 0; p < parts_; ++p)
            for (size_t k = 0; k < 2; ++k) {
                int64_t sum = starts_[p * 2 + k];
                for (size_t t = 0; t < T; ++t) sum += counts_[(t * parts_ + p) * 2 + k];
                starts_[(p + 1) * 2 + k] = sum;
            }
        const size_t items = size_t(starts_[parts_ * 2]);
        if (items > size_t(std::numeric_limits<int32_t>::max())) throw py::value_error("too many gold items");
        g_.ids.resize(items);
        idx.hashes.resize(items);
        g_.key_offsets.resize(items + 1);
        g_.keys.resize(size_t(starts_[parts_ * 2 + 1]));
        for (auto& c : g_.codes) c.resize(items);
    }

    // Each part's new items at their numbers: ids, hashes, their slots, keys and the codes into the part's values.
    void fill_items(Chunk<GoldLine>& chunk) {
        if (part_values_.size() < parts_) part_values_.resize(parts_, std::vector<ValueTable>(fields_));
        parallel_blocks(int64_t(parts_), workers_, 1, [&](int64_t p0, int64_t) {
            const size_t p = size_t(p0);
            std::vector<ValueTable>& tables = part_values_[p];
            for (ValueTable& t : tables) t.clear();
            int32_t item = int32_t(starts_[p * 2]);
            int64_t k = starts_[p * 2 + 1];
            for (size_t i = p * part_lines_; i < std::min(chunk.lines.size(), (p + 1) * part_lines_); ++i) {
                if (flags_[i] != FIRST) continue;
                GoldLine& r = chunk.parsed[i];
                g_.index.hashes[size_t(item)] = r.hash;
                g_.index.shards[IdTable::shard_of(r.hash)].slots[slot_[i]] = item;
                std::copy(r.answer.keys.begin(), r.answer.keys.end(), g_.keys.begin() + k);
                k += int64_t(r.answer.keys.size());
                g_.key_offsets[size_t(item) + 1] = k;
                for (size_t f = 0; f < fields_; ++f) g_.codes[f][size_t(item)] = tables[f].code(r.strata[f]);
                g_.ids[size_t(item)] = std::move(r.rid);
                ++item;
            }
        });
    }

    // The parts' values into each field's table, in part order: the field's codes for the segment's items.
    void merge_values() {
        if (fields_ == 0) return;
        for (size_t p = 0; p < parts_; ++p) {
            const int32_t begin = int32_t(starts_[p * 2]), end = int32_t(starts_[(p + 1) * 2]);
            if (begin == end) continue;
            Segment seg{begin, end, std::vector<std::vector<int32_t>>(fields_)};
            for (size_t f = 0; f < fields_; ++f)
                for (const std::string& v : part_values_[p][f].values) seg.codes[f].push_back(values_[f].code(v));
            segments_.push_back(std::move(seg));
        }
    }

    // The chunk's errors in line order: duplicates, and the reference's problems.
    void report(Chunk<GoldLine>& chunk) {
        const size_t n = chunk.lines.size();
        const bool any_duplicate = n && std::memchr(flags_.data(), DUPLICATE, n);
        if (!any_duplicate && undecided_.empty()) return;
        size_t u = 0;
        for (size_t i = 0; i < n; ++i) {
            const bool undecided = u < undecided_.size() && undecided_[u].line == i;
            if (flags_[i] == DUPLICATE)
                g_.errors.append(make_error_("duplicate_gold", g_.path, chunk.first_line + int64_t(i),
                                             chunk.parsed[i].rid, py::none()));
            else if (undecided && (!undecided_[u].usable || !undecided_[u].problem.is_none()))
                g_.errors.append(undecided_[u].problem);
            u += undecided;
            if (!any_duplicate && u == undecided_.size()) break;
        }
    }

    static constexpr uint8_t FIRST = 1, DUPLICATE = 2;
    GoldIndex& g_;
    const int workers_;
    py::function fallback_, make_error_;
    const size_t fields_;
    std::vector<ValueTable> values_ = std::vector<ValueTable>(fields_);  // per field, codes by first appearance
    std::vector<Segment> segments_;
    // Per chunk:
    std::vector<Undecided> undecided_;
    std::vector<uint8_t> flags_;                        // per line: FIRST, DUPLICATE or 0
    std::vector<size_t> slot_;                          // per FIRST line: its slot in its shard
    std::vector<int64_t> counts_;                       // per thread, per part: new items, their keys
    std::vector<int64_t> starts_;                       // per part: first item, first key (and the ends)
    std::vector<std::vector<ValueTable>> part_values_;  // per part, per field
    size_t part_lines_ = 1, parts_ = 0;
};

std::shared_ptr<GoldIndex> load_gold(const std::string& path, const std::string& task, std::vector<std::string> by,
                                     int workers, py::function fallback, py::function make_error) {
    auto g = std::make_shared<GoldIndex>();
    g->path = path;
    g->task = task_code(task);
    g->by = std::move(by);
    workers = resolve_workers(workers);
    GoldLoader loader(*g, workers, std::move(fallback), std::move(make_error));
    const GoldIndex& read_only = *g;  // what the parse threads read
    auto parse = [&](std::string_view line, GoldLine& out, std::string& tags) {
        GoldLoader::parse(line, read_only, out, tags);
    };
    auto merge = [&](Chunk<GoldLine>& chunk) { loader.merge(chunk); };
    stream_file<GoldLine>(path, workers, parse, merge);
    loader.finish();
    return g;
}

// --------------------------------------------------------- predictions ----

struct PredLine {
    bool blank = false, decided = false;
    std::string rid, model;
    uint64_t hash = 0;
    Answer answer;
    int status = ST_OK;
    double confidence = NaN, difficulty = NaN, tokens = NaN;
    // Set by the parallel parse for a decided line: its gold item (-1: unknown id), its counts and its row in
    // the block's text, formatted as if kept.
    int32_t gi = -1, tp = 0, np = 0, ng = 0;
    size_t row_off = 0, row_len = 0;
    // Set by the merge: a line the reference decided (by_ref: its row is in the chunk's reference text; dropped:
    // it gives no record; warn: its problems' index), its model's index in its block's first-appearance list,
    // whether it gives a row (not a model's second answer), and its model's code.
    bool by_ref = false, dropped = false;
    int32_t warn = -1, lm = -1;
    bool kept = false;
    int32_t m = -1;
};

bool read_optional(json::Cursor& c, double hi, double& out) {
    if (json::literal(c, "null")) {
        out = NaN;
        return true;
    }
    json::Number num;
    double v;
    if (!json::read_number(c, num) || !json::to_double(num, v)) return c.fail();
    if (!(v >= 0.0 && v <= hi)) return c.fail();  // the reference reports it
    out = v;
    return true;
}

void parse_pred_line(std::string_view line, int task, PredLine& out) {
    out.decided = false;
    if ((out.blank = is_blank(line))) return;
    if (!plain_line(line)) return;
    json::Cursor c(line);
    out.model.assign("default"sv);
    out.confidence = out.difficulty = out.tokens = NaN;
    bool has_id = false, has_model = false, has_answer = false, has_output = false;
    bool has_conf = false, has_diff = false, has_tok = false;
    std::string output;
    constexpr double unbounded = std::numeric_limits<double>::infinity();
    auto member = [&](std::string_view key) {
        // A repeated key is left to the reference (json.loads keeps the last).
        if (key == "id"sv) return !has_id && (has_id = json::read_string(c, out.rid));
        if (key == "model"sv) return !has_model && (has_model = json::read_string(c, out.model));
        if (key == "answer"sv) return !has_answer && (has_answer = read_answer(c, task, out.answer));
        if (key == "output"sv) return !has_output && (has_output = json::read_string(c, output));
        if (key == "confidence"sv) return !has_conf && (has_conf = read_optional(c, 1.0, out.confidence));
        if (key == "difficulty"sv) return !has_diff && (has_diff = read_optional(c, 1.0, out.difficulty));
        if (key == "tokens"sv) return !has_tok && (has_tok = read_optional(c, unbounded, out.tokens));
        return json::skip_value(c);
    };
    if (!json::read_object(c, member)) return;
    c.ws();
    if (!c.ok || c.p != c.end || !has_id || !(has_answer || has_output)) return;
    out.status = ST_OK;
    if (!has_answer) {
        if (task == TASK_MCQ) {
            uint32_t mask = 0;
            Extracted r = extract_choices(output, mask);
            if (r == Extracted::Undecided) return;
            if (r == Extracted::None) {
                out.status = ST_UNPARSED;
                mask = 0;
            }
            answer_from_letters(mask, out.answer);
        } else {
            std::vector<Hkl> hkls;
            Extracted r = extract_hkls(output, hkls);
            if (r == Extracted::Undecided) return;
            if (r == Extracted::None) {
                out.status = ST_UNPARSED;
                out.answer.keys.clear();
                out.answer.json = "[]";
            } else if (!answer_from_hkls(hkls, out.answer)) {
                return;  // an index out of range or no Miller-Bravais label: the reference gives the reason
            }
        }
    }
    out.hash = hash_bytes(out.rid);
    out.decided = true;
}

// The metric part of a row depends only on (tp, |P|, |G|, status): formatted once, reused.
struct RowSegments {
    std::string before_id, before_model, tail;
};

// Shared by the parse threads: a filled small slot is read without a lock, anything else under the mutex; a
// stored entry never changes or moves (node storage), so a reference to it stays valid.
struct SegmentCache {
    static constexpr int SMALL = 32;
    static constexpr size_t N_SMALL = 3 * SMALL * SMALL * SMALL;

    explicit SegmentCache(MetricParams p) : prm(p), small(new std::atomic<const RowSegments*>[N_SMALL]) {
        for (size_t i = 0; i < N_SMALL; ++i) small[i].store(nullptr, std::memory_order_relaxed);
    }
    MetricParams prm;
    std::mutex mu;
    std::unordered_map<uint64_t, RowSegments> cache;
    std::unique_ptr<std::atomic<const RowSegments*>[]> small;

    const RowSegments& get(int32_t tp, int32_t np, int32_t ng, int status) {
        const bool is_small = tp < SMALL && np < SMALL && ng < SMALL;
        const size_t slot =
            is_small ? ((size_t(status) * SMALL + size_t(tp)) * SMALL + size_t(np)) * SMALL + size_t(ng) : 0;
        if (is_small)
            if (const RowSegments* hit = small[slot].load(std::memory_order_acquire)) return *hit;
        const uint64_t key = (uint64_t(uint32_t(tp)) << 42) ^ (uint64_t(uint32_t(np)) << 21) ^ uint64_t(uint32_t(ng)) ^
                             (uint64_t(status) << 62);
        std::lock_guard<std::mutex> lock(mu);
        auto it = cache.find(key);
        if (it != cache.end()) return it->second;
        const MetricRow r = metrics_from_counts(tp, np, ng, prm);
        RowSegments s;
        auto num = [](std::string& o, const char* name, double v) {
            o += name;
            append_py_float(o, v);
        };
        num(s.before_id, ",\"em\":", r.em);
        num(s.before_id, ",\"f1\":", r.f1);
        num(s.before_id, ",\"f1_pen\":", r.f1_pen);
        s.before_id += ",\"fn\":" + std::to_string(r.fn) + ",\"fp\":" + std::to_string(r.fp) + ",\"id\":";
        num(s.before_model, ",\"j_pen\":", r.j_pen);
        num(s.before_model, ",\"jaccard\":", r.jaccard);
        s.before_model += ",\"model\":";
        s.tail = std::string(",\"over_predicted\":") + (r.over_predicted ? "true" : "false") +
                 ",\"parse_ok\":" + (status == ST_OK ? "true" : "false");
        num(s.tail, ",\"precision\":", r.precision);
        num(s.tail, ",\"recall\":", r.recall);
        num(s.tail, ",\"sip_f1\":", r.sip_f1);
        num(s.tail, ",\"spc\":", r.spc);
        static const char* names[] = {"ok", "unparsed", "missing"};
        s.tail += std::string(",\"status\":\"") + names[status] + "\",\"tp\":" + std::to_string(r.tp) + "}\n";
        const RowSegments& stored = cache.emplace(key, std::move(s)).first->second;  // node storage: stable address
        if (is_small) small[slot].store(&stored, std::memory_order_release);
        return stored;
    }
};

// Leaves new elements uninitialised on resize: the columns grow by a chunk's rows before threads fill them.
template <class T>
struct NoInit : std::allocator<T> {
    template <class U>
    struct rebind {
        using other = NoInit<U>;
    };
    NoInit() = default;
    template <class U>
    NoInit(const NoInit<U>&) {}
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        if constexpr (sizeof...(Args) == 0)
            ::new (static_cast<void*>(p)) U;
        else
            ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};
template <class T>
using Column = std::vector<T, NoInit<T>>;

struct Columns {
    Column<int32_t> model, gold_idx, tp, n_pred, n_gold;
    Column<uint8_t> status;
    Column<double> confidence, difficulty, tokens;

    void resize(size_t n) {
        for (auto* c : {&model, &gold_idx, &tp, &n_pred, &n_gold}) c->resize(n);
        status.resize(n);
        for (auto* c : {&confidence, &difficulty, &tokens}) c->resize(n);
    }
    void reserve(size_t n) {
        for (auto* c : {&model, &gold_idx, &tp, &n_pred, &n_gold}) c->reserve(n);
        status.reserve(n);
        for (auto* c : {&confidence, &difficulty, &tokens}) c->reserve(n);
    }
    void set(size_t k, const PredLine& r) {
        model[k] = r.m;
        gold_idx[k] = r.gi;
        tp[k] = r.tp;
        n_pred[k] = r.np;
        n_gold[k] = r.ng;
        status[k] = uint8_t(r.status);
        confidence[k] = r.confidence;
        difficulty[k] = r.difficulty;
        tokens[k] = r.tokens;
    }
};

// Hands the vector's storage to numpy without a copy.
template <class T, class A>
py::array_t<T> to_numpy(std::vector<T, A>&& v) {
    auto* heap = new std::vector<T, A>(std::move(v));
    py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T, A>*>(p); });
    return py::array_t<T>(py::ssize_t(heap->size()), heap->data(), owner);
}

// Runs fn(t) for t < n on n threads of their own (none when n is 0); the caller waits, and the first failure is
// raised on it. One is run on the calling thread (see off_thread).
template <class Fn>
void on_threads(int n, Fn&& fn) {
    if (n == 1) {
        fn(0);
        return;
    }
    std::vector<std::exception_ptr> failures(size_t(std::max(n, 0)));
    {
        std::vector<Joiner> threads(failures.size());
        for (int t = 0; t < n; ++t)
            threads[size_t(t)].t = std::thread([&, t] {
                try {
                    fn(t);
                } catch (...) {
                    failures[size_t(t)] = std::current_exception();
                }
            });
    }
    for (auto& f : failures)
        if (f) std::rethrow_exception(f);
}

int32_t count_tp(const int64_t* a, const int64_t* ae, const int64_t* b, const int64_t* be) {
    int32_t tp = 0;
    while (a < ae && b < be) {
        tp += (*a == *b);
        const int64_t x = *a, y = *b;
        a += (x <= y);
        b += (y <= x);
    }
    return tp;
}

py::dict score_stream(const std::vector<std::string>& pred_paths, std::shared_ptr<GoldIndex> gold, double lam,
                      double gamma, int workers, const std::string& out_path, py::function fallback,
                      py::function make_error, py::function progress, py::list errors, int64_t rows_per_file) {
    workers = resolve_workers(workers);
    GoldIndex& g = *gold;
    RowWriter out(out_path, rows_per_file, workers);
    SegmentCache segments(MetricParams{lam, gamma});
    std::vector<std::string> models;
    std::vector<std::vector<uint8_t>> seen;
    Columns cols;
    std::string rows;
    // The columns' room, reserved once from the first chunk's bytes a line over all the prediction files' bytes.
    // Grown chunk by chunk instead, each doubling copied the columns so far onto fresh pages: at 10M rows some
    // 0.6 s of CPU on the one thread that fills them, which the stream waits for. Pages reserved and not used
    // are never touched, so they cost address space, not memory.
    int64_t pred_bytes = 0;
    for (const std::string& path : pred_paths) {
        struct stat st;
        if (::stat(path.c_str(), &st) == 0) pred_bytes += int64_t(st.st_size);
    }
    bool sized = false;
    size_t room = 0;  // rows to reserve before the next fill (0: none)

    auto model_code = [&](const std::string& name) -> int32_t {
        for (int32_t m = int32_t(models.size()) - 1; m >= 0; --m)  // few models: a scan beats hashing
            if (models[size_t(m)] == name) return m;
        models.push_back(name);
        seen.emplace_back(size_t(g.n_items()), uint8_t(0));
        return int32_t(models.size()) - 1;
    };
    // Appends a row to text and sets its counts; thread-safe (the parse threads call it).
    auto format_row = [&](std::string& text, const std::string& rid, const std::string& model, int32_t gi,
                          const Answer& ans, int status, int32_t& tp, int32_t& np, int32_t& ng) {
        const int64_t gb = g.key_offsets[gi], ge = g.key_offsets[gi + 1];
        np = int32_t(ans.keys.size());
        ng = int32_t(ge - gb);
        tp = count_tp(ans.keys.data(), ans.keys.data() + np, g.keys.data() + gb, g.keys.data() + ge);
        const RowSegments& s = segments.get(tp, np, ng, status);
        text += "{\"answer\":";
        text += ans.json;
        text += s.before_id;
        append_json_string(text, rid);
        text += s.before_model;
        append_json_string(text, model);
        text += s.tail;
    };
    auto add_columns = [&](int32_t m, int32_t gi, int32_t tp, int32_t np, int32_t ng, int status, double conf,
                           double diff, double tok) {
        cols.model.push_back(m);
        cols.gold_idx.push_back(gi);
        cols.tp.push_back(tp);
        cols.n_pred.push_back(np);
        cols.n_gold.push_back(ng);
        cols.status.push_back(uint8_t(status));
        cols.confidence.push_back(conf);
        cols.difficulty.push_back(diff);
        cols.tokens.push_back(tok);
    };
    auto emit = [&](const std::string& rid, int32_t m, int32_t gi, const Answer& ans, int status, double conf,
                    double diff, double tok) {
        int32_t tp, np, ng;
        format_row(rows, rid, models[size_t(m)], gi, ans, status, tp, np, ng);
        add_columns(m, gi, tp, np, ng, status, conf, diff, tok);
    };
    // Per parse block of a chunk, what the merge works out for it (kept from chunk to chunk for the storage).
    struct BlockPlan {
        bool by_ref = false;                    // it holds lines the reference decides
        std::vector<const std::string*> names;  // its models by first appearance (lines with a gold item)
        std::vector<int32_t> codes;             // their codes
        std::vector<uint16_t> order;            // its lines with a gold item grouped by shard, in line order
        std::vector<uint32_t> shard_start;      // shard s: order[shard_start[s], shard_start[s + 1])
        std::vector<uint16_t> problems;         // its lines with errors to report, in line order
        std::string rows;                       // its kept rows, when its text does not go to the writer whole
        bool whole = false;
        int64_t records = 0;
        size_t kept = 0;
    };
    std::vector<BlockPlan> plans;
    std::string ref_text;                  // the rows of a chunk's lines the reference decided
    std::vector<py::object> ref_problems;  // and their problems (touched with the GIL held)
    // The duplicate check is split by gold item over threads: 64 items (a cache line of a model's `seen`) a shard.
    auto shard_of = [](int32_t gi, int shards) { return int((uint32_t(gi) >> 6) % uint32_t(shards)); };
    // fn(block) over a chunk's blocks on worker threads (the calling thread waits, so its CPU is the serial part).
    auto each_block = [&](size_t n_blocks, auto&& fn) {
        std::atomic<size_t> next{0};
        on_threads(int(std::min(size_t(workers), n_blocks)), [&](int) {
            for (size_t blk; (blk = next.fetch_add(1)) < n_blocks;) fn(blk);
        });
    };
    // A block's models in first-appearance order and its lines with a gold item by shard; false when it holds a
    // line the reference has still to decide. Lines of unknown ids give no model (the reference's order).
    auto prepare = [&](BlockPlan& p, Chunk<PredLine>& chunk, size_t i0, size_t i1, int shards) {
        p.names.clear();
        p.records = 0;
        p.shard_start.assign(size_t(shards) + 1, 0);
        int32_t last = -1;
        for (size_t i = i0; i < i1; ++i) {
            PredLine& r = chunk.parsed[i];
            if (r.blank) continue;
            ++p.records;
            if (!r.decided && !r.dropped) return false;
            if (!r.decided || r.gi < 0) continue;
            if (last < 0 || *p.names[size_t(last)] != r.model) {  // few models, in runs: a scan beats hashing
                last = int32_t(p.names.size()) - 1;
                while (last >= 0 && *p.names[size_t(last)] != r.model) --last;
                if (last < 0) {
                    last = int32_t(p.names.size());
                    p.names.push_back(&r.model);
                }
            }
            r.lm = last;
            ++p.shard_start[size_t(shard_of(r.gi, shards)) + 1];
        }
        for (int s = 0; s < shards; ++s) p.shard_start[size_t(s) + 1] += p.shard_start[size_t(s)];
        p.order.resize(p.shard_start[size_t(shards)]);
        std::vector<uint32_t> at(p.shard_start.begin(), p.shard_start.end() - 1);
        for (size_t i = i0; i < i1; ++i) {
            const PredLine& r = chunk.parsed[i];
            if (!r.blank && r.decided && r.gi >= 0) p.order[at[size_t(shard_of(r.gi, shards))]++] = uint16_t(i - i0);
        }
        return true;
    };
    // The reference's reading of an undecided line: its row goes to ref_text, its problems are kept for later.
    auto resolve = [&](PredLine& r, const std::string& path, int64_t line, std::string_view raw) {
        py::gil_scoped_acquire gil;
        // (problems, None) or (problems, (rid, model, answer, status, confidence, difficulty, tokens))
        py::tuple res = fallback(py::bytes(raw.data(), raw.size()), path, line);
        py::object warnings = res[0];
        if (py::len(warnings)) {
            r.warn = int32_t(ref_problems.size());
            ref_problems.push_back(warnings);
        }
        if (res[1].is_none()) {
            r.dropped = true;
            return;
        }
        py::tuple p = res[1];
        r.rid = p[0].cast<std::string>();
        r.model = p[1].cast<std::string>();
        answer_from_python(p[2], g.task, r.answer);
        r.status = p[3].cast<int>();
        r.confidence = p[4].cast<double>();
        r.difficulty = p[5].cast<double>();
        r.tokens = p[6].cast<double>();
        r.hash = hash_bytes(r.rid);
        r.gi = g.index.find(g.ids, r.rid, r.hash);
        r.decided = r.by_ref = true;
        if (r.gi < 0) return;
        r.row_off = ref_text.size();
        format_row(ref_text, r.rid, r.model, r.gi, r.answer, r.status, r.tp, r.np, r.ng);
        r.row_len = ref_text.size() - r.row_off;
    };
    // Whether the block's text goes to the writer as it is (every line has its row there and every one is kept),
    // else its kept rows copied; its kept rows counted; its lines with problems listed.
    auto finish = [&](BlockPlan& p, Chunk<PredLine>& chunk, size_t i0, size_t i1) {
        const std::string& text = chunk.texts[i0 / size_t(PARSE_BLOCK)];
        p.problems.clear();
        p.rows.clear();
        p.kept = 0;
        bool whole = !p.by_ref;
        for (size_t i = i0; i < i1; ++i) {
            const PredLine& r = chunk.parsed[i];
            if (r.blank) continue;
            p.kept += r.kept;
            whole = whole && r.kept;
            if ((r.decided && !r.kept) || r.warn >= 0) p.problems.push_back(uint16_t(i - i0));
        }
        p.whole = whole;
        if (!whole)
            for (size_t i = i0; i < i1; ++i) {
                const PredLine& r = chunk.parsed[i];
                if (r.kept) p.rows.append(r.by_ref ? ref_text : text, r.row_off, r.row_len);
            }
    };
    // Each block's kept lines written into the columns at the block's offset.
    std::vector<size_t> block_rows;  // per block of a chunk: its first row in the columns
    auto fill_columns = [&](const Chunk<PredLine>& chunk, size_t n_blocks) {
        const size_t n = chunk.lines.size();
        if (room > block_rows[n_blocks]) {
            try {
                cols.reserve(room);
            } catch (const std::bad_alloc&) {  // no such room to be had: the columns grow as they go
            }
        }
        room = 0;
        cols.resize(block_rows[n_blocks]);  // off the calling thread: growing copies the columns so far
        each_block(n_blocks, [&](size_t blk) {
            size_t k = block_rows[blk];
            for (size_t i = blk * size_t(PARSE_BLOCK); i < std::min(n, (blk + 1) * size_t(PARSE_BLOCK)); ++i)
                if (chunk.parsed[i].kept) cols.set(k++, chunk.parsed[i]);
        });
    };
    // Pieces for the writer, in order: blocks' texts moved in uncopied, or their kept rows; and their row counts.
    std::vector<std::string> pieces;
    std::vector<size_t> piece_rows;

    for (const std::string& path : pred_paths) {
        auto parse = [&](std::string_view line, PredLine& out, std::string& text) {
            out.kept = out.by_ref = out.dropped = false;
            out.warn = out.lm = out.gi = -1;
            parse_pred_line(line, g.task, out);
            if (!out.decided) return;
            // What does not depend on the lines before: the gold item, the counts and the row, as if kept.
            out.gi = g.index.find(g.ids, out.rid, out.hash);
            if (out.gi < 0) return;
            out.row_off = text.size();
            format_row(text, out.rid, out.model, out.gi, out.answer, out.status, out.tp, out.np, out.ng);
            out.row_len = text.size() - out.row_off;
        };
        // What depends on the lines before (model codes by first appearance, a model's second answer, errors in
        // line order) is decided per block and per shard of gold items on worker threads; this thread keeps the
        // reference's lines (rare), the model codes of each block's few models, the problems and the pieces.
        auto merge = [&](Chunk<PredLine>& chunk) {
            int64_t n_records = 0;
            {
                py::gil_scoped_release nogil;
                const size_t n = chunk.lines.size(), block = size_t(PARSE_BLOCK);
                const size_t n_blocks = (n + block - 1) / block;
                const int shards = n_blocks > 1 ? workers : 1;  // a chunk of one block is not worth the threads
                if (!sized) {  // the rows to come from the first chunk's bytes a line (16 at least), 5% over
                    sized = true;
                    size_t bytes = 0, lines = 0;
                    for (std::string_view line : chunk.lines)
                        if (!line.empty()) bytes += line.size() + 1, ++lines;
                    if (lines)
                        room = size_t(double(pred_bytes) / double(std::max<size_t>(bytes / lines, 16)) * 1.05) + 65536;
                }
                if (plans.size() < n_blocks) plans.resize(n_blocks);
                auto first = [&](size_t blk) { return blk * block; };
                auto last = [&](size_t blk) { return std::min(n, (blk + 1) * block); };
                each_block(n_blocks, [&](size_t blk) {
                    plans[blk].by_ref = !prepare(plans[blk], chunk, first(blk), last(blk), shards);
                });
                // The reference's lines in line order (their problems are reported in their places below).
                ref_text.clear();
                for (size_t blk = 0; blk < n_blocks; ++blk) {
                    BlockPlan& p = plans[blk];
                    if (!p.by_ref) continue;
                    for (size_t i = first(blk); i < last(blk); ++i) {
                        PredLine& r = chunk.parsed[i];
                        if (!r.blank && !r.decided) resolve(r, path, chunk.first_line + int64_t(i), chunk.lines[i]);
                    }
                    prepare(p, chunk, first(blk), last(blk), shards);
                }
                for (size_t blk = 0; blk < n_blocks; ++blk) {
                    BlockPlan& p = plans[blk];
                    n_records += p.records;
                    p.codes.clear();
                    for (const std::string* name : p.names) p.codes.push_back(model_code(*name));
                }
                // A model's first answer to an item is kept: each shard walks its items' lines in line order.
                on_threads(shards, [&](int s) {
                    for (size_t blk = 0; blk < n_blocks; ++blk) {
                        const BlockPlan& p = plans[blk];
                        for (uint32_t k = p.shard_start[size_t(s)]; k < p.shard_start[size_t(s) + 1]; ++k) {
                            PredLine& r = chunk.parsed[first(blk) + p.order[k]];
                            r.m = p.codes[size_t(r.lm)];
                            uint8_t& was = seen[size_t(r.m)][size_t(r.gi)];
                            r.kept = !was;
                            was = 1;
                        }
                    }
                });
                each_block(n_blocks, [&](size_t blk) { finish(plans[blk], chunk, first(blk), last(blk)); });
                bool any_problem = false;
                for (size_t blk = 0; blk < n_blocks && !any_problem; ++blk) any_problem = !plans[blk].problems.empty();
                if (any_problem) {
                    py::gil_scoped_acquire gil;
                    for (size_t blk = 0; blk < n_blocks; ++blk)
                        for (uint16_t k : plans[blk].problems) {
                            const PredLine& r = chunk.parsed[first(blk) + k];
                            const int64_t line = chunk.first_line + int64_t(first(blk) + k);
                            if (r.decided && r.gi < 0)
                                errors.append(make_error("unknown_id", path, line, r.rid, r.model));
                            else if (r.decided && !r.kept)
                                errors.append(make_error("duplicate_prediction", path, line, r.rid, r.model));
                            else  // the reference's problems with a line it kept or dropped
                                for (auto e : ref_problems[size_t(r.warn)]) errors.append(e);
                        }
                    ref_problems.clear();
                }
                block_rows.assign(n_blocks + 1, cols.model.size());
                for (size_t blk = 0; blk < n_blocks; ++blk) block_rows[blk + 1] = block_rows[blk] + plans[blk].kept;
                piece_rows.clear();
                for (size_t blk = 0; blk < n_blocks; ++blk) {
                    std::string& piece = plans[blk].whole ? chunk.texts[blk] : plans[blk].rows;
                    if (piece.empty()) continue;
                    pieces.push_back(std::move(piece));
                    piece_rows.push_back(plans[blk].kept);
                    piece = std::string();
                }
                // The columns are filled off this thread while the rows go to the writer.
                std::exception_ptr failure;
                {
                    Joiner fill{std::thread([&] {
                        try {
                            fill_columns(chunk, n_blocks);
                        } catch (...) {
                            failure = std::current_exception();
                        }
                    })};
                    out.write(pieces, piece_rows);
                }
                if (failure) std::rethrow_exception(failure);
            }
            progress(n_records);
        };
        stream_file<PredLine>(path, workers, parse, merge);
    }
    // Rows for gold items a model never answered: scored as empty predictions. Each kept row marked one (model,
    // item) seen, so the rest are the missing rows: room for them at once, not by doublings on this thread.
    const Answer empty;
    cols.reserve(models.size() * size_t(g.n_items()));
    for (int32_t m = 0; m < int32_t(models.size()); ++m) {
        const size_t before = cols.model.size();
        for (int32_t gi = 0; gi < g.n_items(); ++gi) {
            if (seen[size_t(m)][size_t(gi)]) continue;
            emit(g.ids[size_t(gi)], m, gi, empty, ST_MISSING, NaN, NaN, NaN);
            errors.append(make_error("missing_prediction", g.path, py::none(), g.ids[size_t(gi)], models[size_t(m)]));
        }
        py::gil_scoped_release nogil;
        out.write(rows, cols.model.size() - before);
    }
    {
        py::gil_scoped_release nogil;
        out.finish();
    }
    py::dict res;
    res["models"] = models;
    res["model"] = to_numpy(std::move(cols.model));
    res["gold_idx"] = to_numpy(std::move(cols.gold_idx));
    res["tp"] = to_numpy(std::move(cols.tp));
    res["n_pred"] = to_numpy(std::move(cols.n_pred));
    res["n_gold"] = to_numpy(std::move(cols.n_gold));
    res["status"] = to_numpy(std::move(cols.status));
    res["confidence"] = to_numpy(std::move(cols.confidence));
    res["difficulty"] = to_numpy(std::move(cols.difficulty));
    res["tokens"] = to_numpy(std::move(cols.tokens));
    res["parts"] = out.parts();
    return res;
}

}  // namespace

void bind_pipeline(py::module_& m) {
    m.doc() = "Streaming JSONL scoring: gold index, prediction stream, rows identical to the reference path.";
    py::class_<GoldIndex, std::shared_ptr<GoldIndex>>(m, "GoldIndex")
        .def_property_readonly("n_items", &GoldIndex::n_items)
        .def_readonly("path", &GoldIndex::path)
        .def_readonly("errors", &GoldIndex::errors)
        .def("ids_of",
             [](const GoldIndex& g, const std::vector<int64_t>& idx) {
                 std::vector<std::string> out;
                 out.reserve(idx.size());
                 for (int64_t i : idx) out.push_back(g.ids.at(size_t(i)));
                 return out;
             })
        .def(
            "keys_of",
            [](const GoldIndex& g, const std::vector<int64_t>& idx) {
                std::vector<std::vector<int64_t>> out;
                for (int64_t i : idx)
                    out.emplace_back(g.keys.begin() + g.key_offsets.at(size_t(i)),
                                     g.keys.begin() + g.key_offsets.at(size_t(i) + 1));
                return out;
            },
            "Each item's answer keys (sorted); exposed for tests.")
        .def("strata", [](GoldIndex& g) {
            py::dict d;
            for (size_t f = 0; f < g.by.size(); ++f) {
                std::vector<int64_t> codes(g.codes[f].begin(), g.codes[f].end());
                d[py::str(g.by[f])] = py::make_tuple(to_numpy(std::move(codes)), g.values[f]);
            }
            return d;
        });
    m.def(
        "float_repr",
        [](double v) {
            std::string s;
            append_py_float(s, v);
            return s;
        },
        "repr(v) as the rows write it (finite v); exposed for tests.");
    m.def(
        "json_string",
        [](const std::string& v) {
            std::string s;
            append_json_string(s, v);
            return s;
        },
        "json.dumps(v, ensure_ascii=False) for a str; exposed for tests.");
    m.def("load_gold", &load_gold, py::arg("path"), py::arg("task"), py::arg("by"), py::arg("workers"),
          py::arg("fallback"), py::arg("make_error"));
    m.def("score_stream", &score_stream, py::arg("pred_paths"), py::arg("gold"), py::arg("sip_lambda"),
          py::arg("sip_gamma"), py::arg("workers"), py::arg("out_path"), py::arg("fallback"), py::arg("make_error"),
          py::arg("progress"), py::arg("errors"), py::arg("rows_per_file") = 0);
}

}  // namespace bm

// A small, strict JSON reader for one JSONL record, for the streaming scorer.
// It accepts a subset of what Python's json.loads accepts and, on that
// subset, reads the same values; anything else (or anything it is unsure
// of) makes the caller hand the whole line to the Python reference.
#pragma once
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace bm::json {

inline bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Whole-line UTF-8 validity (Python decodes the line before parsing); rejects
// overlongs, surrogates and code points above U+10FFFF like Python's decoder.
inline bool valid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* e = p + s.size();
    while (p < e) {
        // ASCII fast path, 8 bytes at a time.
        while (p + 8 <= e) {
            uint64_t w;
            std::memcpy(&w, p, 8);
            if (w & 0x8080808080808080ULL) break;
            p += 8;
        }
        if (p >= e) break;
        unsigned c = *p;
        if (c < 0x80) {
            ++p;
            continue;
        }
        int n;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07;
        } else
            return false;
        if (e - p <= n) return false;
        for (int k = 1; k <= n; ++k) {
            if ((p[k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[k] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
        p += n + 1;
    }
    return true;
}

struct Cursor {
    const char* p;
    const char* end;
    bool ok = true;

    explicit Cursor(std::string_view s) : p(s.data()), end(s.data() + s.size()) {}
    void ws() {
        while (p < end && is_ws(*p)) ++p;
    }
    bool eat(char c) {
        ws();
        if (p < end && *p == c) {
            ++p;
            return true;
        }
        return false;
    }
    char peek() {
        ws();
        return p < end ? *p : '\0';
    }
    bool fail() {
        ok = false;
        return false;
    }
};

inline void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80)
        out.push_back(char(cp));
    else if (cp < 0x800) {
        out.push_back(char(0xC0 | (cp >> 6)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(char(0xE0 | (cp >> 12)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(char(0xF0 | (cp >> 18)));
        out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    }
}

inline int hex4(const char* q) {
    int v = 0;
    for (int k = 0; k < 4; ++k) {
        char c = q[k];
        int d = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

// Reads a string at the cursor (after whitespace) into out (decoded UTF-8).
// Lone surrogates are refused: Python would keep them, but they cannot be written back as UTF-8.
inline bool read_string(Cursor& c, std::string& out) {
    out.clear();
    if (!c.eat('"')) return c.fail();
    const char* p = c.p;
    while (true) {
        const char* start = p;
        // Eight bytes at a time: stop at the first '"', '\\' or control byte.
        constexpr uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        while (c.end - p >= 8) {
            uint64_t w;
            std::memcpy(&w, p, 8);
            const uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
            const uint64_t hit = (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w)) & highs;
            if (hit) {
                p += __builtin_ctzll(hit) / 8;
                break;
            }
            p += 8;
        }
        while (p < c.end && *p != '"' && *p != '\\' && static_cast<unsigned char>(*p) >= 0x20) ++p;
        out.append(start, p);
        // A raw control byte (NUL included) is malformed JSON: Python reads the line and reports it.
        if (p >= c.end || static_cast<unsigned char>(*p) < 0x20) return c.fail();
        if (*p == '"') {
            c.p = p + 1;
            return true;
        }
        // escape
        if (p + 1 >= c.end) return c.fail();
        char e = p[1];
        p += 2;
        switch (e) {
            case '"':
                out.push_back('"');
                break;
            case '\\':
                out.push_back('\\');
                break;
            case '/':
                out.push_back('/');
                break;
            case 'b':
                out.push_back('\b');
                break;
            case 'f':
                out.push_back('\f');
                break;
            case 'n':
                out.push_back('\n');
                break;
            case 'r':
                out.push_back('\r');
                break;
            case 't':
                out.push_back('\t');
                break;
            case 'u': {
                if (c.end - p < 4) return c.fail();
                int u = hex4(p);
                if (u < 0) return c.fail();
                p += 4;
                uint32_t cp = uint32_t(u);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (c.end - p < 6 || p[0] != '\\' || p[1] != 'u') return c.fail();
                    int lo = hex4(p + 2);
                    if (lo < 0xDC00 || lo > 0xDFFF) return c.fail();
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (uint32_t(lo) - 0xDC00);
                    p += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return c.fail();
                }
                put_utf8(out, cp);
                break;
            }
            default:
                return c.fail();
        }
    }
}

// A JSON number token; is_int when it has no fraction or exponent.
struct Number {
    std::string_view text;
    bool is_int = false;
};

// Python reads an integer token with int(), which refuses more digits than
// sys.get_int_max_str_digits() allows (never fewer than 640 when limited):
// longer integer tokens are left to Python.
constexpr size_t kMaxIntChars = 640;

inline bool read_number(Cursor& c, Number& num) {
    c.ws();
    const char* s = c.p;
    const char* p = s;
    if (p < c.end && *p == '-') ++p;
    if (p >= c.end) return c.fail();
    if (*p == '0')
        ++p;
    else if (*p >= '1' && *p <= '9')
        while (p < c.end && *p >= '0' && *p <= '9') ++p;
    else
        return c.fail();
    bool is_int = true;
    if (p < c.end && *p == '.') {
        is_int = false;
        ++p;
        if (p >= c.end || !(*p >= '0' && *p <= '9')) return c.fail();
        while (p < c.end && *p >= '0' && *p <= '9') ++p;
    }
    if (p < c.end && (*p == 'e' || *p == 'E')) {
        is_int = false;
        ++p;
        if (p < c.end && (*p == '+' || *p == '-')) ++p;
        if (p >= c.end || !(*p >= '0' && *p <= '9')) return c.fail();
        while (p < c.end && *p >= '0' && *p <= '9') ++p;
    }
    if (is_int && size_t(p - s) > kMaxIntChars) return c.fail();
    num.text = std::string_view(s, size_t(p - s));
    num.is_int = is_int;
    c.p = p;
    return true;
}

// Integer value of an int token that fits comfortably (|v| < 1e15); false otherwise.
inline bool small_int(const Number& n, int64_t& v) {
    if (!n.is_int || n.text.size() > 16) return false;
    auto r = std::from_chars(n.text.data(), n.text.data() + n.text.size(), v);
    return r.ec == std::errc() && r.ptr == n.text.data() + n.text.size();
}

// The float Python's json gives for the token (int tokens go through float(int), same rounding).
inline bool to_double(const Number& n, double& v) {
    if (n.is_int && n.text.size() > 300) return false;  // float(int) would overflow in Python
    auto r = std::from_chars(n.text.data(), n.text.data() + n.text.size(), v);
    return r.ec == std::errc() && r.ptr == n.text.data() + n.text.size();
}

inline bool literal(Cursor& c, std::string_view word) {
    c.ws();
    const size_t n = word.size();
    if (size_t(c.end - c.p) >= n && std::memcmp(c.p, word.data(), n) == 0) {
        c.p += n;
        return true;
    }
    return false;
}

// Calls member(key) at each member of the object at the cursor; member reads
// the value and returns false to give up.
template <class Fn>
bool read_object(Cursor& c, Fn&& member) {
    if (!c.eat('{')) return c.fail();
    if (c.eat('}')) return true;
    std::string key;
    do {
        if (!read_string(c, key) || !c.eat(':') || !member(key)) return c.fail();
    } while (c.eat(','));
    return c.eat('}') || c.fail();
}

// Skips any value, checking its syntax; NaN/Infinity, deep nesting and long integers are refused (handed to Python).
inline bool skip_value(Cursor& c, int depth = 0) {
    if (depth > 64) return c.fail();
    char ch = c.peek();
    if (ch == '"') {
        std::string tmp;
        return read_string(c, tmp);
    }
    if (ch == '{') return read_object(c, [&](std::string_view) { return skip_value(c, depth + 1); });
    if (ch == '[') {
        ++c.p;
        if (c.eat(']')) return true;
        do {
            if (!skip_value(c, depth + 1)) return c.fail();
        } while (c.eat(','));
        return c.eat(']') || c.fail();
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        Number n;
        return read_number(c, n);
    }
    if (literal(c, "true") || literal(c, "false") || literal(c, "null")) return true;
    return c.fail();
}

}  // namespace bm::json

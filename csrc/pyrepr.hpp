// Text exactly as Python's json.dumps(..., ensure_ascii=False) writes it:
// floats in repr form, strings with the same escapes.
#pragma once
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

namespace bm {

// repr(float) for finite values: shortest round-trip digits, fixed notation
// for decimal exponents in [-4, 16), otherwise d.ddde+XX.
inline void append_py_float(std::string& out, double v) {
    char buf[40];
    auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string_view s(buf, size_t(res.ptr - buf));
    if (!s.empty() && s[0] == '-') {
        out.push_back('-');
        s.remove_prefix(1);
    }
    const size_t epos = s.find('e');
    std::string digits;
    digits.push_back(s[0]);
    if (epos > 1) digits.append(s.substr(2, epos - 2));  // skip the '.'
    int exp = 0;
    std::from_chars(s.data() + epos + 1 + (s[epos + 1] == '+'), s.data() + s.size(), exp);
    const int n = int(digits.size());
    if (exp >= -4 && exp < 16) {
        const int point = exp + 1;  // digits before the decimal point
        if (point <= 0) {
            out.append("0.");
            out.append(size_t(-point), '0');
            out.append(digits);
        } else if (point >= n) {
            out.append(digits);
            out.append(size_t(point - n), '0');
            out.append(".0");
        } else {
            out.append(digits, 0, size_t(point));
            out.push_back('.');
            out.append(digits, size_t(point), std::string::npos);
        }
    } else {
        out.push_back(digits[0]);
        if (n > 1) {
            out.push_back('.');
            out.append(digits, 1, std::string::npos);
        }
        char e[16];
        std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        out.append(e);
    }
}

inline void append_json_string(std::string& out, std::string_view s) {
    out.push_back('"');
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        out.append(s, start, i - start);
        switch (c) {
            case '"':
                out.append("\\\"");
                break;
            case '\\':
                out.append("\\\\");
                break;
            case '\n':
                out.append("\\n");
                break;
            case '\r':
                out.append("\\r");
                break;
            case '\t':
                out.append("\\t");
                break;
            case '\b':
                out.append("\\b");
                break;
            case '\f':
                out.append("\\f");
                break;
            default: {
                char u[8];
                std::snprintf(u, sizeof u, "\\u%04x", c);
                out.append(u);
            }
        }
        start = i + 1;
    }
    out.append(s, start, std::string::npos);
    out.push_back('"');
}

}  // namespace bm

// Lines told to the person at the terminal while work runs.
#pragma once

#include <cstdio>
#include <string>

namespace npuscope {

// Writes `line` and a newline to `out`. On a terminal it first clears the current line (carriage
// return, erase to its end), so a message told mid-run replaces a progress bar drawn with "\r"
// rather than being glued to its end; the bar is drawn again below it. Elsewhere (a pipe, a
// file) the line is written as it is.
void consoleLine(std::FILE* out, const std::string& line);

}  // namespace npuscope

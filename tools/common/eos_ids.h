// Kept only for serve_command.cpp's include: the EOS rule is end_of_sequence_ids in
// text/tokenizer.h.
#pragma once

#include "text/tokenizer.h"

# cmake -DIN=x.spv -DOUT=x.c -DNAME=name -P embed_spirv.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
math(EXPR rem "${bytes} % 4")
if(NOT rem EQUAL 0)
  message(FATAL_ERROR "${IN}: SPIR-V size ${bytes} is not a multiple of 4")
endif()
# Little-endian words: reorder each 8-hex-digit group.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x........u,){8})" "\\1\n  " words "${words}")
file(WRITE "${OUT}" "#include <stddef.h>\n#include <stdint.h>\nconst uint32_t hs_spv_${NAME}[] = {\n  ${words}\n};\nconst size_t hs_spv_${NAME}_size = sizeof(hs_spv_${NAME});\n")

#include "error_table.h"

namespace simcuda {
const ErrorEntry *find_error(const ErrorEntry *table, int code)
{
    for (; table->name; ++table)
        if (table->code == code)
            return table;
    return nullptr;
}
}  // namespace simcuda

// Which way each statistic is good.
#include "models/goodness.h"

namespace fp8scope::views {

Better better_of(ErrorStat s) {
    switch (s) {
        case ErrorStat::SqnrDb:
        case ErrorStat::Cosine: return Better::Higher;
        case ErrorStat::Mse:
        case ErrorStat::UnderflowPct:
        case ErrorStat::OverflowPct:
        case ErrorStat::RelL2:
        case ErrorStat::MaxAbsErr: return Better::Lower;
    }
    return Better::Neither;
}

}  // namespace fp8scope::views

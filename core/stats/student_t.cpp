// Student's t from the incomplete beta function: P(|T| > t) = I_{dof/(dof+t^2)}(dof/2, 1/2).
#include "stats/student_t.h"

#include <cmath>
#include <initializer_list>
#include <limits>

namespace fp8scope::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The continued fraction of I_x(a, b), which converges fast for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
    constexpr double tiny = 1e-300, eps = 1e-15;
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
    if (std::fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double f = d;
    for (int m = 1; m <= 500; ++m) {
        const double m2 = 2.0 * m;
        for (const double num : {m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)),
                                 -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0))}) {
            d = 1.0 + num * d;
            if (std::fabs(d) < tiny) d = tiny;
            c = 1.0 + num / c;
            if (std::fabs(c) < tiny) c = tiny;
            d = 1.0 / d;
            f *= d * c;
        }
        if (std::fabs(d * c - 1.0) < eps) break;
    }
    return f;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
    if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1)) return kNaN;
    if (x == 0 || x == 1) return x;
    const double front =
        std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
    if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_fraction(a, b, x) / a;
    return 1.0 - front * beta_fraction(b, a, 1.0 - x) / b;  // the symmetry I_x(a, b) = 1 - I_{1-x}(b, a)
}

double student_t_cdf(double t, double dof) {
    if (!(dof > 0) || std::isnan(t)) return kNaN;
    if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
    const double tail = 0.5 * incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t));  // P(T > |t|)
    return t > 0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double dof) {
    if (!(p > 0) || !(p < 1) || !(dof > 0)) return kNaN;
    if (p < 0.5) return -student_t_quantile(1.0 - p, dof);
    double lo = 0.0, hi = 1.0;
    while (student_t_cdf(hi, dof) < p && hi < 1e300) hi *= 2.0;
    for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {  // the CDF is monotone: bisection is safe
        const double mid = 0.5 * (lo + hi);
        (student_t_cdf(mid, dof) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

}  // namespace fp8scope::stats

/**
 * The goals a benchmark judged in its run. Each goal line still says its figure and its goal
 * (`... (goal >= 70%)`); the tally gives the run's verdict as its last line, `goals met: X of Y`,
 * so a reader (or a script) finds the verdict without parsing every figure.
 */
export class GoalTally {
  private met = 0;
  private judged = 0;

  /** Records one goal, met or not, and returns `met` (so a caller can branch on it). */
  judge(met: boolean): boolean {
    this.judged += 1;
    if (met) this.met += 1;
    return met;
  }

  /** How many goals were met of how many judged. */
  counts(): { met: number; judged: number } {
    return { met: this.met, judged: this.judged };
  }

  /** The benchmark's last line: `goals met: X of Y`. */
  summary(): string {
    return `goals met: ${this.met} of ${this.judged}`;
  }
}

/-
VerigateReplay: the kernel step of `trl-verigate lean-recheck --backend replay`.

Run OUTSIDE any sandbox, as `lake env lean --run VerigateReplay.lean MANIFEST.json` in the Lean project, after
the Python side compiled, each in its own sandbox, the trusted challenges (header + statement + `sorry`) and the
untrusted submissions to `.olean` files. No submitted code runs here: a submission's `.olean` is read as data, and
each of its declarations is re-checked by the kernel (`Lean.Environment.replay`, as lean4checker and SafeVerify do)
on top of the header's imports, which are loaded once per distinct import list for the whole batch.

MANIFEST.json: {"items": [{"id", "theorem", "challenge": PATH.olean, "challenge_theorem": NAME,
                           "submission": PATH.olean, "axiom_whitelist": [NAME, ...]}, ...]}
Several items may share one challenge module (one import of the header for all their trusted statements), each
declared there under its own `challenge_theorem` (`theorem` plus a unique suffix; default `theorem`). Auxiliary
constants the elaborator named after it (`<challenge_theorem>.match_1`) are read as `<theorem>.match_1` when the
types are compared, as the submission's own elaboration names them.
stdout: one line per item, {"id", "ok", "axioms", "message"}, the recheck contract's verdict line.

An item is ok only when: the submission imports exactly the challenge's modules; every declaration of the
submission replays through the kernel; it declares a theorem named `theorem` whose type and universe parameters
are identical (`==` on the kernel expressions) to those of the challenge's `challenge_theorem`; and every axiom
that theorem depends on is in the whitelist.

Written against the Lean core sources of `readModuleData`, `importModules`, `Environment.toKernelEnv` and
`Lean.Replay` as of Lean v4.33 (the toolchain of the project's REPL transcripts), where the replay is
`Lean.Environment.replay (newConstants) (env : Kernel.Environment) : IO Kernel.Environment`; Lean v4.34.0-rc1 moved
it to `Lean.Kernel.Environment.replay` (lean4#14391): on such a toolchain change that one call in `checkItem`.
This file was NOT compiled or run where it was written (no Lean there).
Axioms are collected by walking the replayed kernel environment, not with `collectAxioms`, so nothing an `.olean`
claims about its own axioms is taken on trust.
Known limit (comparator avoids it by exporting terms as text): reading an `.olean` trusts Lean's compacted-region
loader with bytes the sandboxed compile could have written.
-/
import Lean

open Lean

namespace VerigateReplay

structure Item where
  id : String
  theoremName : Name
  challenge : System.FilePath
  challengeName : Name
  submission : System.FilePath
  allowed : Array Name

def parseItem (json : Json) : Except String Item := do
  let id ← json.getObjValAs? String "id"
  let theoremName ← json.getObjValAs? String "theorem"
  let challenge ← json.getObjValAs? String "challenge"
  let challengeName := (json.getObjValAs? String "challenge_theorem").toOption.getD theoremName
  let submission ← json.getObjValAs? String "submission"
  let allowed ← json.getObjValAs? (Array String) "axiom_whitelist"
  return {
    id, theoremName := theoremName.toName, challenge := ⟨challenge⟩, challengeName := challengeName.toName,
    submission := ⟨submission⟩,
    allowed := allowed.map String.toName }

def verdictLine (id : String) (ok : Bool) (axioms : Array Name) (message : String) : String :=
  (Json.mkObj [
    ("id", Json.str id),
    ("ok", Json.bool ok),
    ("axioms", Json.arr (axioms.map fun name => Json.str name.toString)),
    ("message", Json.str message)]).compress

/-- The constant `name` as the module itself declares it (not an import's). -/
def declaredIn (module : ModuleData) (name : Name) : Option ConstantInfo := Id.run do
  for constName in module.constNames, info in module.constants do
    if constName == name then
      return some info
  return none

/-- The axioms `name` depends on in `env`, in the order they are reached. -/
partial def collectAxioms (env : Kernel.Environment) (name : Name) : StateM (NameSet × Array Name) Unit := do
  if (← get).1.contains name then
    return
  modify fun (seen, found) => (seen.insert name, found)
  match env.find? name with
  | some (.axiomInfo _) => modify fun (seen, found) => (seen, found.push name)
  | some info =>
    for used in info.getUsedConstantsAsSet do
      collectAxioms env used
  | none => pure ()

/-- `type` with every constant under `source` (the challenge's name and its auxiliary constants) renamed under
`target`, the submission's theorem name. -/
def renamedUnder (source target : Name) (type : Expr) : Expr :=
  if source == target then type else
    type.replace fun
      | .const name levels => if source.isPrefixOf name then some (.const (name.replacePrefix source target) levels)
        else none
      | _ => none

/-- Module data read once per path: items that share a challenge module do not map it again each. -/
abbrev ModuleCache := IO.Ref (Array (System.FilePath × ModuleData))

def readModuleOnce (cache : ModuleCache) (path : System.FilePath) : IO ModuleData := do
  if let some (_, data) := (← cache.get).find? (·.1 == path) then
    return data
  let (data, _) ← readModuleData path
  cache.modify (·.push (path, data))
  return data

abbrev BaseCache := IO.Ref (Array (Array Name × Kernel.Environment))

/-- The kernel environment of `imports`, imported once per distinct import list. -/
def baseEnvironment (cache : BaseCache) (imports : Array Import) : IO Kernel.Environment := do
  let key := imports.map (·.module)
  if let some (_, env) := (← cache.get).find? (·.1 == key) then
    return env
  let env := (← importModules imports {} 0).toKernelEnv
  cache.modify (·.push (key, env))
  return env

def refuse (message : String) : IO (Bool × Array Name × String) :=
  return (false, #[], message)

/-- The verdict on a submission whose declarations the kernel accepted into `env`, against the challenge's `target`. -/
def judgeReplayed (item : Item) (target : ConstantInfo) (env : Kernel.Environment) :
    IO (Bool × Array Name × String) := do
  let some (.thmInfo proved) := env.find? item.theoremName
    | refuse s!"{item.theoremName} is not a theorem the kernel accepted"
  let targetType := renamedUnder item.challengeName item.theoremName target.type
  unless proved.levelParams == target.levelParams && proved.type == targetType do
    return ← refuse s!"{item.theoremName} does not state the trusted statement (its type differs from the challenge's)"
  let ((), (_, axioms)) := (collectAxioms env item.theoremName).run ({}, #[])
  let outside := axioms.filter fun axiomName => !item.allowed.contains axiomName
  unless outside.isEmpty do
    return (false, axioms, s!"{item.theoremName} depends on axioms outside the whitelist: {outside}")
  return (true, axioms, "the kernel accepts the replayed proof of the trusted statement")

def checkItem (cache : BaseCache) (challenges : ModuleCache) (item : Item) : IO (Bool × Array Name × String) := do
  let challenge ← readModuleOnce challenges item.challenge
  let some target := declaredIn challenge item.challengeName
    | refuse s!"the trusted challenge declares no {item.challengeName}"
  let (submission, _) ← readModuleData item.submission
  let expectedImports := challenge.imports.map (·.module)
  let imports := submission.imports.map (·.module)
  unless imports == expectedImports do
    return ← refuse s!"the submission imports {imports}, the trusted header {expectedImports}"
  let mut newConstants : Std.HashMap Name ConstantInfo := {}
  for name in submission.constNames, info in submission.constants do
    newConstants := newConstants.insert name info
  unless newConstants.contains item.theoremName do
    return ← refuse s!"the submission declares no {item.theoremName}"
  let base ← baseEnvironment cache challenge.imports
  match ← (Lean.Environment.replay newConstants base).toBaseIO with
  | .error error => refuse s!"the kernel rejects the submission: {error}"
  | .ok env => judgeReplayed item target env

end VerigateReplay

open VerigateReplay in
def main (args : List String) : IO UInt32 := do
  let [manifestPath] := args
    | do
      IO.eprintln "usage: lean --run VerigateReplay.lean MANIFEST.json"
      return 2
  initSearchPath (← findSysroot)
  let manifest ← IO.ofExcept (Json.parse (← IO.FS.readFile manifestPath))
  let items ← IO.ofExcept (manifest.getObjValAs? (Array Json) "items")
  let cache : BaseCache ← IO.mkRef #[]
  let challenges : ModuleCache ← IO.mkRef #[]
  let stdout ← IO.getStdout
  for json in items do
    let item ← IO.ofExcept (parseItem json)
    -- One item's failure (an unreadable .olean, an import error) refuses that item only.
    let (ok, axioms, message) ← tryCatch (checkItem cache challenges item)
      fun error => pure (false, #[], s!"replay failed: {error}")
    stdout.putStrLn (verdictLine item.id ok axioms message)
    stdout.flush
  return 0
